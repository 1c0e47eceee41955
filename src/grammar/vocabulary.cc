#include "grammar/vocabulary.h"

#include <algorithm>

#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::grammar {

Vocabulary::Vocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> eos_ids)
    : bytes_(std::move(token_bytes)), eos_ids_(std::move(eos_ids)) {
  for (int32_t id : eos_ids_)
    check(id >= 0 && static_cast<size_t>(id) < bytes_.size(), ErrorKind::invalid_argument,
          "grammar vocabulary: eos id " + std::to_string(id) + " is outside the vocabulary");
  // An end token never carries text inside the grammar.
  for (int32_t id : eos_ids_) bytes_[static_cast<size_t>(id)].clear();
  sorted_index_.assign(bytes_.size(), -1);
  ordinary_.assign(mask_words(), 0);
  for (size_t id = 0; id < bytes_.size(); ++id)
    if (!bytes_[id].empty()) {
      sorted_.push_back(static_cast<int32_t>(id));
      ordinary_[id / 32] |= uint32_t{1} << (id % 32);
    }
  std::sort(sorted_.begin(), sorted_.end(),
            [&](int32_t a, int32_t b) { return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)]; });
  lcp_.assign(sorted_.size(), 0);
  sorted_offsets_.assign(1, 0);
  for (size_t i = 0; i < sorted_.size(); ++i) {
    sorted_blob_ += bytes_[static_cast<size_t>(sorted_[i])];
    sorted_offsets_.push_back(static_cast<uint32_t>(sorted_blob_.size()));
    sorted_index_[static_cast<size_t>(sorted_[i])] = static_cast<int32_t>(i);
    if (i == 0) continue;
    const std::string& a = bytes_[static_cast<size_t>(sorted_[i - 1])];
    const std::string& b = bytes_[static_cast<size_t>(sorted_[i])];
    size_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
    lcp_[i] = static_cast<uint16_t>(std::min<size_t>(l, 65535));
  }
}

bool Vocabulary::is_eos(int32_t id) const { return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end(); }

std::shared_ptr<const Vocabulary> Vocabulary::from_tokenizer(const Tokenizer& tokenizer, size_t vocab_size, std::vector<int32_t> eos_ids,
                                                             std::span<const int32_t> special_as_text) {
  const size_t n = std::max(vocab_size, tokenizer.vocab_size());
  std::vector<std::string> bytes(n);
  for (size_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const auto tid = static_cast<int32_t>(id);
    if (!tokenizer.id_to_token(tid)) continue;
    if (tokenizer.is_special(tid) && std::find(special_as_text.begin(), special_as_text.end(), tid) == special_as_text.end()) continue;
    bytes[id] = tokenizer.decode_raw(std::span<const int32_t>(&tid, 1));
  }
  std::vector<int32_t> eos = eos_ids.empty() ? tokenizer.eos_ids() : std::move(eos_ids);
  if (eos.empty() && tokenizer.eos_id() >= 0) eos.push_back(tokenizer.eos_id());
  std::erase_if(eos, [&](int32_t id) { return id < 0 || static_cast<size_t>(id) >= n; });
  return std::make_shared<const Vocabulary>(std::move(bytes), std::move(eos));
}

}  // namespace sanctum::grammar
