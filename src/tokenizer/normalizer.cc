#include "tokenizer/normalizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/regex.h"

namespace sanctum {

void unicode_normalize(std::string& text, UnicodeForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case UnicodeForm::nfc: n = icu::Normalizer2::getNFCInstance(status); break;
    case UnicodeForm::nfd: n = icu::Normalizer2::getNFDInstance(status); break;
    case UnicodeForm::nfkc: n = icu::Normalizer2::getNFKCInstance(status); break;
    case UnicodeForm::nfkd: n = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status) || !n) fail(ErrorKind::internal, "ICU normalizer unavailable");
  // Fast path: pure ASCII is already normalized in every form.
  bool ascii = true;
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  if (ascii) return;
  const icu::UnicodeString src = icu::UnicodeString::fromUTF8(text);
  if (n->isNormalized(src, status) && U_SUCCESS(status)) return;
  status = U_ZERO_ERROR;
  const icu::UnicodeString dst = n->normalize(src, status);
  if (U_FAILURE(status)) fail(ErrorKind::invalid_input, "Unicode normalization failed");
  text.clear();
  dst.toUTF8String(text);
}

void unicode_lowercase(std::string& text) {
  // Per code point full lowercase mapping (no context such as final sigma), as Rust's char::to_lowercase.
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const char32_t c = utf8::next(text, i);
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
      continue;
    }
    icu::UnicodeString one(static_cast<UChar32>(c));
    one.toLower(icu::Locale::getRoot());
    one.toUTF8String(out);
  }
  text = std::move(out);
}

bool is_unicode_whitespace(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE); }

bool is_unicode_alphanumeric(char32_t c) {
  if (u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC)) return true;
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

namespace {

using json = nlohmann::json;

class FormNormalizer final : public Normalizer {
 public:
  explicit FormNormalizer(UnicodeForm f) : form_(f) {}
  void normalize(std::string& text) const override { unicode_normalize(text, form_); }

 private:
  UnicodeForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override { unicode_lowercase(text); }
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    size_t i = 0;
    while (i < text.size()) {
      const size_t start = i;
      const char32_t c = utf8::next(text, i);
      if (u_charType(static_cast<UChar32>(c)) != U_NON_SPACING_MARK) out.append(text, start, i - start);
    }
    text = std::move(out);
  }
};

// Replace: a literal string or a regex, every occurrence.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(const std::string& pattern, bool is_regex, std::string content)
      : regex_(is_regex ? pattern : Regex::escape(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    std::vector<std::pair<size_t, size_t>> matches;
    regex_.find_all(text, matches);
    if (matches.empty()) return;
    std::string out;
    size_t prev = 0;
    for (auto [b, e] : matches) {
      out.append(text, prev, b - prev);
      out += content_;
      prev = e;
    }
    out.append(text, prev, std::string::npos);
    text = std::move(out);
  }

 private:
  Regex regex_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string p) : prefix_(std::move(p)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      size_t i = 0;
      while (i < end) {
        const size_t at = i;
        if (!is_unicode_whitespace(utf8::next(text, i))) {
          i = at;
          break;
        }
      }
      begin = i;
    }
    if (right_) {
      while (end > begin) {
        size_t s = end - 1;
        while (s > begin && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
        size_t j = s;
        if (!is_unicode_whitespace(utf8::next(text, j))) break;
        end = s;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec.at("type").get<std::string>();
  if (type == "NFC") return std::make_unique<FormNormalizer>(UnicodeForm::nfc);
  if (type == "NFD") return std::make_unique<FormNormalizer>(UnicodeForm::nfd);
  if (type == "NFKC") return std::make_unique<FormNormalizer>(UnicodeForm::nfkc);
  if (type == "NFKD") return std::make_unique<FormNormalizer>(UnicodeForm::nfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(spec.at("prepend").get<std::string>());
  if (type == "Strip") return std::make_unique<StripNormalizer>(spec.value("strip_left", true), spec.value("strip_right", true));
  if (type == "Replace") {
    const json& pattern = spec.at("pattern");
    const bool is_regex = pattern.contains("Regex");
    return std::make_unique<ReplaceNormalizer>(pattern.at(is_regex ? "Regex" : "String").get<std::string>(), is_regex,
                                               spec.at("content").get<std::string>());
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const json& p : spec.at("normalizers")) {
      auto n = make_normalizer(p);
      if (n) parts.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  fail(ErrorKind::unsupported, "tokenizer.json: normalizer type '" + type + "' is not supported");
}

}  // namespace sanctum
