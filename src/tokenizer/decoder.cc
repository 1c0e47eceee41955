#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace sanctum {
namespace {

using json = nlohmann::json;
constexpr const char* kReplacementChar = "\xEF\xBF\xBD";

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    std::string bytes;
    for (const auto& t : tokens)
      if (!byte_level::decode(t, bytes)) bytes += t;  // a token outside the alphabet keeps its own bytes
    tokens.assign(1, raw ? std::move(bytes) : utf8::lossy(bytes));
  }
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    std::vector<std::string> out;
    std::string group;
    size_t group_len = 0;
    auto flush = [&] {
      if (group_len == 0) return;
      if (raw || utf8::is_valid(group)) {
        out.push_back(group);
      } else {
        for (size_t k = 0; k < group_len; ++k) out.emplace_back(kReplacementChar);
      }
      group.clear();
      group_len = 0;
    };
    for (auto& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        auto hex = [](char c) {
          return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        };
        const int hi = hex(t[3]), lo = hex(t[4]);
        if (hi >= 0 && lo >= 0) byte = hi * 16 + lo;
      }
      if (byte >= 0) {
        group += static_cast<char>(byte);
        ++group_len;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (auto& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++k) b += content_.size();
      for (size_t k = 0; k < stop_ && e >= b + content_.size() && t.compare(e - content_.size(), content_.size(), content_) == 0; ++k)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(const std::string& pattern, std::string content) : re_(pattern), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    std::vector<std::pair<size_t, size_t>> m;
    for (auto& t : tokens) {
      m.clear();
      re_.find_all(t, m);
      if (m.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (auto [b, e] : m) {
        out.append(t, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  Regex re_;
  std::string content_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepend) : replacement_(std::move(replacement)), prepend_(prepend) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t p = 0; p < t.size();) {
        if (!replacement_.empty() && t.compare(p, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && prepend_)) out += ' ';
          p += replacement_.size();
        } else {
          out += t[p++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool prepend_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    for (const auto& p : parts_) p->decode_chain(tokens, raw);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec.at("type").get<std::string>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(spec.at("content").get<std::string>(), spec.value("start", 0), spec.value("stop", 0));
  if (type == "Replace") {
    const json& pattern = spec.at("pattern");
    const bool is_regex = pattern.contains("Regex");
    const std::string p = pattern.at(is_regex ? "Regex" : "String").get<std::string>();
    return std::make_unique<ReplaceDecoder>(is_regex ? p : Regex::escape(p), spec.at("content").get<std::string>());
  }
  if (type == "Metaspace") {
    std::string scheme = spec.value("prepend_scheme", "");
    if (scheme.empty()) scheme = spec.value("add_prefix_space", true) ? "always" : "never";
    return std::make_unique<MetaspaceDecoder>(spec.value("replacement", "\xE2\x96\x81"), scheme != "never");
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const json& d : spec.at("decoders")) {
      auto p = make_decoder(d);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  fail(ErrorKind::unsupported, "tokenizer.json: decoder type '" + type + "' is not supported");
}

}  // namespace sanctum
