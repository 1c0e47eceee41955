#pragma once
// Stop strings over streamed text. Text arrives in pieces (one detokenized token at a time); a stop
// string may straddle pieces. The matcher holds back the shortest tail that could still be the start
// of a stop string, so the text it releases never contains any part of a stop string that matched.
#include <string>
#include <string_view>
#include <vector>

namespace sanctum {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string matched: `text` ends right before it; emit nothing more
  };

  // Adds a piece of generated text.
  Result push(std::string_view piece);
  // Generation ended without a match: releases whatever was held back.
  std::string flush();
  bool stopped() const { return stopped_; }
  // The stop string that matched (the first listed of those matching earliest); empty before a match.
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace sanctum
