#include "tokenizer/tokenizer.h"

#include "base/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace sanctum {

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens, bool parse_special) const {
  utf8::require_valid(text, "text to encode");
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 8);
  if (add_special_tokens) out.insert(out.end(), prefix_ids_.begin(), prefix_ids_.end());
  std::vector<Segment> segments, inner;
  added_.split(text, /*normalized_pass=*/false, parse_special, segments);
  const bool normalized_tokens = added_.has_normalized_tokens();
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    const std::string_view piece = text.substr(s.begin, s.end - s.begin);
    if (!normalizer_ && !normalized_tokens) {
      encode_text(piece, s.begin == 0, out);
      continue;
    }
    std::string normalized(piece);
    if (normalizer_) normalizer_->normalize(normalized);
    if (!normalized_tokens) {
      encode_text(normalized, s.begin == 0, out);
      continue;
    }
    inner.clear();
    added_.split(normalized, /*normalized_pass=*/true, parse_special, inner);
    for (const Segment& t : inner) {
      if (t.id >= 0) out.push_back(t.id);
      else encode_text(std::string_view(normalized).substr(t.begin, t.end - t.begin), s.begin == 0 && t.begin == 0, out);
    }
  }
  if (add_special_tokens) out.insert(out.end(), suffix_ids_.begin(), suffix_ids_.end());
  return out;
}

void Tokenizer::encode_text(std::string_view text, bool first, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (!pre_tokenizer_) {
    model_->encode_word(text, out);
    return;
  }
  thread_local std::vector<std::string> pieces;
  pieces.clear();
  pre_tokenizer_->split(text, first, pieces);
  for (const auto& p : pieces) model_->encode_word(p, out);
}

std::string Tokenizer::decode_impl(std::span<const int32_t> ids, bool skip_special_tokens, bool raw) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken* t = added_.by_id(id)) {
      if (!(skip_special_tokens && t->special)) tokens.push_back(t->content);
      continue;
    }
    if (id >= 0 && static_cast<size_t>(id) < id_to_token_.size() && !id_to_token_[id].empty()) tokens.push_back(id_to_token_[id]);
  }
  if (!decoder_) {
    std::string out;
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k) out += ' ';
      out += tokens[k];
    }
    return out;
  }
  decoder_->decode_chain(tokens, raw);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode_impl(ids, skip_special_tokens, false);
}

std::string Tokenizer::decode_raw(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode_impl(ids, skip_special_tokens, true);
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* t = added_.by_content(token)) return t->id;
  if (raw_bytes_) {
    std::string bytes;
    if (byte_level::decode(token, bytes)) {
      const int32_t id = model_->find(bytes);
      if (id >= 0) return id;
    }
  } else {
    const int32_t id = model_->find(token);
    if (id >= 0) return id;
  }
  for (size_t id = 0; id < id_to_token_.size(); ++id)  // tokens the byte-level model cannot hold
    if (id_to_token_[id] == token) return static_cast<int32_t>(id);
  return -1;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* t = added_.by_id(id)) return t->content;
  if (id >= 0 && static_cast<size_t>(id) < id_to_token_.size() && !id_to_token_[id].empty()) return id_to_token_[id];
  return std::nullopt;
}

size_t Tokenizer::vocab_size() const {
  size_t n = id_to_token_.size();
  for (const auto& t : added_.tokens()) n = std::max(n, static_cast<size_t>(t.id) + 1);
  return n;
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* t = added_.by_id(id);
  return t && t->special;
}

}  // namespace sanctum
