#pragma once
// PCRE2 (UTF + UCP, JIT) wrapper used by Split pre-tokenizers and Replace normalizers/decoders.
// Patterns come from tokenizer.json (Oniguruma syntax, which PCRE2 accepts for what checkpoints use).
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sanctum {

class Regex {
 public:
  // Throws Error(invalid_input) with the PCRE2 message and offset when the pattern does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches, left to right, as [begin, end) byte ranges. `text` must be valid UTF-8.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

  static std::string escape(std::string_view literal);

 private:
  void* code_ = nullptr;  // pcre2_code_8*
  std::string pattern_;
};

}  // namespace sanctum
