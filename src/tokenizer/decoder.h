#pragma once
// Decoders from tokenizer.json: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence.
// They work on the list of token strings, as HF's decode_chain does, and the result is joined.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sanctum {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // raw: keep undecodable byte sequences as raw bytes instead of U+FFFD (the streaming decoder decides
  // itself where UTF-8 boundaries fall).
  virtual void decode_chain(std::vector<std::string>& tokens, bool raw) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec);

}  // namespace sanctum
