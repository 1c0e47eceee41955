#include "chat/reasoning_splitter.h"

#include <algorithm>

namespace sanctum {

namespace {
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// Length of the longest tail of `s` that is a proper prefix of `tag`.
size_t partial_tail(std::string_view s, std::string_view tag) {
  for (size_t len = std::min(s.size(), tag.size() - 1); len > 0; --len)
    if (s.substr(s.size() - len) == tag.substr(0, len)) return len;
  return 0;
}
}  // namespace

ReasoningSplitter::ReasoningSplitter(bool enabled, bool start_in_reasoning)
    : enabled_(enabled), mode_(!enabled             ? Mode::content
                               : start_in_reasoning ? Mode::reasoning
                                                    : Mode::before) {}

ReasoningSplitter::Out ReasoningSplitter::push(std::string_view text) {
  Out out;
  held_.append(text);
  for (;;) {
    if (mode_ == Mode::content) {
      if (strip_newlines_) {
        size_t k = held_.find_first_not_of("\r\n");
        if (k == std::string::npos) {
          held_.clear();
          return out;
        }
        held_.erase(0, k);
        strip_newlines_ = false;
      }
      out.content += held_;
      held_.clear();
      return out;
    }
    if (mode_ == Mode::before) {
      size_t k = held_.find_first_not_of(" \t\r\n");
      if (k == std::string::npos) return out;  // only whitespace so far: wait
      std::string_view rest = std::string_view(held_).substr(k);
      if (rest.substr(0, kOpen.size()) == kOpen) {
        held_.erase(0, k + kOpen.size());
        mode_ = Mode::reasoning;
        continue;
      }
      if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // maybe the tag
      mode_ = Mode::content;
      continue;
    }
    // Mode::reasoning
    size_t close = held_.find(kClose);
    if (close != std::string::npos) {
      out.reasoning += held_.substr(0, close);
      held_.erase(0, close + kClose.size());
      mode_ = Mode::content;
      strip_newlines_ = true;
      continue;
    }
    size_t keep = partial_tail(held_, kClose);
    out.reasoning += held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
}

ReasoningSplitter::Out ReasoningSplitter::flush() {
  Out out;
  if (mode_ == Mode::reasoning) out.reasoning.swap(held_);
  else if (!strip_newlines_) out.content.swap(held_);
  held_.clear();
  return out;
}

}  // namespace sanctum
