#pragma once
// Normalizers from tokenizer.json: NFC/NFD/NFKC/NFKD, Lowercase, Replace, Prepend, Strip, StripAccents,
// Sequence. Each rewrites a (valid UTF-8) string in place; offsets are not tracked (we only need ids).
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace sanctum {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// Builds the normalizer a tokenizer.json "normalizer" object describes; null JSON gives nullptr.
// Throws Error(unsupported) naming the type for kinds we do not implement.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec);

// Unicode helpers (ICU-backed) also used by pre-tokenizers and added-token matching.
enum class UnicodeForm { nfc, nfd, nfkc, nfkd };
void unicode_normalize(std::string& text, UnicodeForm form);
void unicode_lowercase(std::string& text);
bool is_unicode_whitespace(char32_t c);    // Rust char::is_whitespace (White_Space property)
bool is_unicode_alphanumeric(char32_t c);  // Rust char::is_alphanumeric

}  // namespace sanctum
