// libFuzzer: arbitrary bytes through encode (both special-token modes), decode and the streaming decoder
// of a real tokenizer. Invalid UTF-8 must throw sanctum::Error, never crash; valid text must round-trip
// through decode (up to the NFC normalizer); streamed pieces must join to the full decode.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

// SANCTUM_FUZZ_TOKENIZER=DIR picks another tokenizer; the default is the committed Qwen3 one.
std::string default_dir() { return SANCTUM_TEST_DATA_DIR "/tokenizers/qwen3"; }

const sanctum::Tokenizer& tokenizer() {
  static const sanctum::Tokenizer t = [] {
    const char* dir = std::getenv("SANCTUM_FUZZ_TOKENIZER");
    return sanctum::Tokenizer::load(dir ? dir : default_dir());
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const sanctum::Tokenizer& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const bool parse_special = size % 2 == 0;
    const auto ids = tok.encode(text, false, parse_special);
    if (!parse_special && !std::getenv("SANCTUM_FUZZ_TOKENIZER")) {
      // Qwen3 is byte-level BPE behind an NFC normalizer: decode(encode(t)) == NFC(t).
      std::string expected(text);
      sanctum::unicode_normalize(expected, sanctum::UnicodeForm::nfc);
      if (tok.decode(ids) != expected) std::abort();
    }
    sanctum::StreamingDecoder stream(tok);
    std::string joined;
    for (int32_t id : ids) joined += stream.push(id);
    joined += stream.flush();
    if (joined != tok.decode(ids)) std::abort();
  } catch (const sanctum::Error&) {
    // invalid UTF-8: the expected way to refuse
  }
  // Arbitrary ids (including out of range) must decode without crashing.
  std::vector<int32_t> ids;
  for (size_t k = 0; k + 4 <= size && ids.size() < 64; k += 4) {
    int32_t v;
    std::memcpy(&v, data + k, 4);
    ids.push_back(v % 200000);
  }
  sanctum::StreamingDecoder stream(tok);
  for (int32_t id : ids) stream.push(id);
  stream.flush();
  tok.decode(ids);
  return 0;
}
