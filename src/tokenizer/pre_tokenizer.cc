#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace sanctum {
namespace {

using json = nlohmann::json;
using Range = std::pair<size_t, size_t>;

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

Behavior parse_behavior(const std::string& s) {
  if (s == "Removed") return Behavior::removed;
  if (s == "Isolated") return Behavior::isolated;
  if (s == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (s == "MergedWithNext") return Behavior::merged_with_next;
  if (s == "Contiguous") return Behavior::contiguous;
  fail(ErrorKind::unsupported, "tokenizer.json: split behavior '" + s + "' is not supported");
}

// Splits `text` at regex matches and applies the behaviour (same rules as HF NormalizedString::split).
void split_by_regex(const Regex& re, Behavior behavior, bool invert, std::string_view text, std::vector<std::string>& out) {
  std::vector<Range> matches;
  re.find_all(text, matches);
  // (range, is_match) covering the whole text.
  std::vector<std::pair<Range, bool>> parts;
  size_t prev = 0;
  for (auto m : matches) {
    if (m.first > prev) parts.push_back({{prev, m.first}, invert});
    parts.push_back({m, !invert});
    prev = m.second;
  }
  if (prev < text.size()) parts.push_back({{prev, text.size()}, invert});

  std::vector<Range> pieces;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::removed:
      for (auto& [r, m] : parts)
        if (!m) pieces.push_back(r);
      break;
    case Behavior::isolated:
      for (auto& [r, m] : parts) pieces.push_back(r);
      break;
    case Behavior::merged_with_previous:
      for (auto& [r, m] : parts) {
        if (m && !previous_match && !pieces.empty()) pieces.back().second = r.second;
        else pieces.push_back(r);
        previous_match = m;
      }
      break;
    case Behavior::merged_with_next:
      for (size_t k = parts.size(); k-- > 0;) {
        auto& [r, m] = parts[k];
        if (m && !previous_match && !pieces.empty()) pieces.back().first = r.first;
        else pieces.push_back(r);
        previous_match = m;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    case Behavior::contiguous:
      for (size_t k = 0; k < parts.size(); ++k) {
        auto& [r, m] = parts[k];
        if (k > 0 && m == previous_match) pieces.back().second = r.second;
        else pieces.push_back(r);
        previous_match = m;
      }
      break;
  }
  for (auto [b, e] : pieces)
    if (e > b) out.emplace_back(text.substr(b, e - b));
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(const std::string& pattern, Behavior b, bool invert) : re_(pattern), behavior_(b), invert_(invert) {}
  void split(std::string_view text, bool, std::vector<std::string>& out) const override {
    split_by_regex(re_, behavior_, invert_, text, out);
  }

 private:
  Regex re_;
  Behavior behavior_;
  bool invert_;
};

constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex, bool raw_bytes)
      : add_prefix_space_(add_prefix_space), raw_bytes_(raw_bytes) {
    if (use_regex) re_ = std::make_unique<Regex>(kGpt2Pattern);
  }
  void split(std::string_view text, bool, std::vector<std::string>& out) const override {
    std::string with_space;
    if (add_prefix_space_ && (text.empty() || text[0] != ' ')) {
      with_space = " ";
      with_space += text;
      text = with_space;
    }
    const size_t first = out.size();
    if (re_) split_by_regex(*re_, Behavior::isolated, false, text, out);
    else if (!text.empty()) out.emplace_back(text);
    if (!raw_bytes_)
      for (size_t k = first; k < out.size(); ++k) out[k] = byte_level::encode(out[k]);
  }

 private:
  bool add_prefix_space_, raw_bytes_;
  std::unique_ptr<Regex> re_;
};

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, std::string scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(std::move(scheme)), split_(split), re_(Regex::escape(replacement_)) {}
  void split(std::string_view text, bool first, std::vector<std::string>& out) const override {
    std::string s;
    s.reserve(text.size() + 3);
    for (char c : text) {
      if (c == ' ') s += replacement_;
      else s += c;
    }
    const bool prepend = scheme_ == "always" || (scheme_ == "first" && first);
    if (prepend && s.compare(0, replacement_.size(), replacement_) != 0) s.insert(0, replacement_);
    if (split_) split_by_regex(re_, Behavior::merged_with_next, false, s, out);
    else if (!s.empty()) out.push_back(std::move(s));
  }

 private:
  std::string replacement_, scheme_;
  bool split_;
  Regex re_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> stages) : stages_(std::move(stages)) {}
  void split(std::string_view text, bool first, std::vector<std::string>& out) const override {
    if (stages_.empty()) {
      if (!text.empty()) out.emplace_back(text);
      return;
    }
    std::vector<std::string> current{std::string(text)}, next;
    for (size_t s = 0; s < stages_.size(); ++s) {
      auto& target = s + 1 == stages_.size() ? out : next;
      for (size_t k = 0; k < current.size(); ++k) stages_[s]->split(current[k], first && k == 0, target);
      if (s + 1 < stages_.size()) {
        current.swap(next);
        next.clear();
      }
    }
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> stages_;
};

std::unique_ptr<PreTokenizer> make_regex_split(const std::string& pattern, Behavior b, bool invert = false) {
  return std::make_unique<SplitPreTokenizer>(pattern, b, invert);
}

}  // namespace

bool ends_with_byte_level(const json& spec) {
  if (spec.is_null()) return false;
  const std::string type = spec.at("type").get<std::string>();
  if (type == "ByteLevel") return true;
  if (type == "Sequence") {
    const json& stages = spec.at("pretokenizers");
    return !stages.empty() && ends_with_byte_level(stages.back());
  }
  return false;
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& spec, const PreTokenizerOptions& options) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec.at("type").get<std::string>();
  if (type == "Split") {
    const json& pattern = spec.at("pattern");
    const bool is_regex = pattern.contains("Regex");
    const std::string p = pattern.at(is_regex ? "Regex" : "String").get<std::string>();
    return make_regex_split(is_regex ? p : Regex::escape(p), parse_behavior(spec.at("behavior").get<std::string>()),
                            spec.value("invert", false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(spec.value("add_prefix_space", true), spec.value("use_regex", true), options.raw_bytes);
  if (type == "Metaspace") {
    std::string scheme = spec.value("prepend_scheme", "");
    if (scheme.empty()) scheme = spec.value("add_prefix_space", true) ? "always" : "never";
    return std::make_unique<MetaspacePreTokenizer>(spec.value("replacement", "\xE2\x96\x81"), scheme, spec.value("split", true));
  }
  if (type == "Digits")
    return spec.value("individual_digits", false) ? make_regex_split(R"(\p{N})", Behavior::isolated)
                                                  : make_regex_split(R"(\p{N}+)", Behavior::isolated);
  if (type == "Punctuation")
    return make_regex_split(R"([\p{P}\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E])", parse_behavior(spec.value("behavior", "Isolated")));
  if (type == "Whitespace") return make_regex_split(R"(\w+|[^\w\s]+)", Behavior::removed, true);
  if (type == "WhitespaceSplit") return make_regex_split(R"(\s+)", Behavior::removed);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> stages;
    const json& list = spec.at("pretokenizers");
    for (size_t k = 0; k < list.size(); ++k) {
      PreTokenizerOptions stage_options = options;
      stage_options.raw_bytes = options.raw_bytes && k + 1 == list.size();  // only the last stage may keep bytes
      auto p = make_pre_tokenizer(list[k], stage_options);
      if (p) stages.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(stages));
  }
  fail(ErrorKind::unsupported, "tokenizer.json: pre_tokenizer type '" + type + "' is not supported");
}

}  // namespace sanctum
