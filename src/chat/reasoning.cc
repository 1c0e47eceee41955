#include "chat/reasoning.h"

#include <algorithm>

namespace sanctum {
namespace {

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool starts_in_reasoning, std::string open_tag, std::string close_tag)
    : open_(std::move(open_tag)), close_(std::move(close_tag)), state_(starts_in_reasoning ? State::reasoning : State::before) {}

ReasoningSplitter::Delta ReasoningSplitter::push(std::string_view text) {
  Delta d;
  std::string buf = held_ + std::string(text);
  held_.clear();
  while (!buf.empty()) {
    if (state_ == State::after) {
      d.content += buf;
      break;
    }
    const std::string& tag = state_ == State::before ? open_ : close_;
    std::string& sink = state_ == State::before ? d.content : d.reasoning;
    const size_t at = buf.find(tag);
    if (at != std::string::npos) {
      sink += buf.substr(0, at);
      buf.erase(0, at + tag.size());
      state_ = state_ == State::before ? State::reasoning : State::after;
      continue;
    }
    const size_t keep = partial_tag_suffix(buf, tag);
    sink += buf.substr(0, buf.size() - keep);
    held_ = buf.substr(buf.size() - keep);
    break;
  }
  return d;
}

ReasoningSplitter::Delta ReasoningSplitter::flush() {
  Delta d;
  if (state_ == State::reasoning)
    d.reasoning = std::move(held_);
  else
    d.content = std::move(held_);
  held_.clear();
  return d;
}

ReasoningSplitter::Delta split_reasoning(std::string_view text, bool starts_in_reasoning) {
  ReasoningSplitter s(starts_in_reasoning);
  ReasoningSplitter::Delta d = s.push(text);
  ReasoningSplitter::Delta rest = s.flush();
  d.reasoning += rest.reasoning;
  d.content += rest.content;
  return d;
}

}  // namespace sanctum
