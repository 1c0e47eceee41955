#pragma once
// Pre-tokenizers from tokenizer.json: Split (regex or literal, all five behaviours, invert), ByteLevel,
// Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit, Sequence. Each turns one piece of text
// into the pieces the model encodes separately.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sanctum {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // `first`: the piece starts at offset 0 of the original input (Metaspace prepend_scheme "first").
  virtual void split(std::string_view text, bool first, std::vector<std::string>& out) const = 0;
};

struct PreTokenizerOptions {
  // When true the final ByteLevel stage keeps raw bytes (the BPE vocabulary was converted to bytes),
  // instead of mapping each byte to its alphabet character.
  bool raw_bytes = false;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec, const PreTokenizerOptions& options);

// True when the spec's last stage is a ByteLevel pre-tokenizer (so raw_bytes mode is possible).
bool ends_with_byte_level(const nlohmann::json& spec);

}  // namespace sanctum
