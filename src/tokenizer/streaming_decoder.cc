#include "tokenizer/streaming_decoder.h"

#include "base/utf8.h"
#include "tokenizer/tokenizer.h"

namespace sanctum {

std::string StreamingDecoder::push(int32_t id) {
  pending_.push_back(id);
  std::vector<int32_t> window;
  window.reserve(pending_.size() + 1);
  if (context_ >= 0) window.push_back(context_);
  window.insert(window.end(), pending_.begin(), pending_.end());
  const std::string prefix = context_ >= 0 ? tokenizer_->decode_raw(std::span(&context_, 1), skip_special_) : std::string();
  const std::string all = tokenizer_->decode_raw(window, skip_special_);
  const std::string text = all.compare(0, prefix.size(), prefix) == 0 ? all.substr(prefix.size()) : all;
  bool incomplete = false;
  const size_t valid = utf8::valid_prefix(text, &incomplete);
  if (valid == text.size()) {
    context_ = pending_.back();
    pending_.clear();
    return text;
  }
  if (incomplete) return {};  // wait for the bytes that complete the code point
  // Bytes that no continuation can repair: emit them the way a full decode shows them.
  return flush();
}

std::string StreamingDecoder::flush() {
  if (pending_.empty()) return {};
  std::vector<int32_t> window;
  if (context_ >= 0) window.push_back(context_);
  window.insert(window.end(), pending_.begin(), pending_.end());
  const std::string prefix = context_ >= 0 ? tokenizer_->decode(std::span(&context_, 1), skip_special_) : std::string();
  const std::string all = tokenizer_->decode(window, skip_special_);
  context_ = pending_.back();
  pending_.clear();
  return all.compare(0, prefix.size(), prefix) == 0 ? all.substr(prefix.size()) : all;
}

}  // namespace sanctum
