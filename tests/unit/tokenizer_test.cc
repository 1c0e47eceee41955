// Tokenizer: known ids on real files, special-token control, streaming decode properties, bad input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

const std::string kData = SANCTUM_TEST_DATA_DIR "/tokenizers/";

const sanctum::Tokenizer& qwen() {
  static const sanctum::Tokenizer t = sanctum::Tokenizer::load(kData + "qwen3");
  return t;
}
const sanctum::Tokenizer& gemma() {
  static const sanctum::Tokenizer t = sanctum::Tokenizer::load(kData + "gemma3");
  return t;
}

TEST(Tokenizer, qwen3_known_ids_match_hf) {
  const std::vector<int32_t> expected = {9707, 1879, 11, 432, 594, 220, 16, 17, 18, 19, 20, 220, 151644, 872, 198};
  EXPECT_EQ(qwen().encode("Hello world, it's 12345 <|im_start|>user\n"), expected);
}

TEST(Tokenizer, special_tokens_can_stay_text) {
  const auto parsed = qwen().encode("<|im_start|>", false, true);
  const auto literal = qwen().encode("<|im_start|>", false, false);
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed[0], qwen().token_to_id("<|im_start|>"));
  EXPECT_GT(literal.size(), 1u);
  EXPECT_EQ(qwen().decode(literal), "<|im_start|>");
}

TEST(Tokenizer, config_declares_eos_and_template) {
  EXPECT_EQ(qwen().eos_token(), "<|im_end|>");
  EXPECT_EQ(qwen().eos_id(), qwen().token_to_id("<|im_end|>"));
  EXPECT_FALSE(qwen().chat_template().empty());
  EXPECT_EQ(qwen().token_to_id("definitely-not-a-token"), -1);
  EXPECT_GE(qwen().vocab_size(), 151643u);
  EXPECT_EQ(gemma().bos_id(), 2);
  EXPECT_TRUE(gemma().add_bos());
  EXPECT_EQ(gemma().encode("hi").front(), 2);  // TemplateProcessing adds <bos>
}

void expect_stream_equals_decode(const sanctum::Tokenizer& tok, const std::string& text) {
  const auto ids = tok.encode(text, false);
  sanctum::StreamingDecoder stream(tok);
  std::string joined;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_TRUE(sanctum::utf8::is_valid(piece)) << "broken code point emitted for " << text;
    joined += piece;
  }
  joined += stream.flush();
  EXPECT_EQ(joined, tok.decode(ids));
}

TEST(StreamingDecoder, byte_level_pieces_are_whole_code_points) {
  for (const char* text :
       {"Hello 👋 world 🌍!", "日本語のテキストです。", "👨‍👩‍👧‍👦 family", "e\xcc\x81 combining", "plain ascii"})
    expect_stream_equals_decode(qwen(), text);
}

TEST(StreamingDecoder, byte_fallback_pieces_are_whole_code_points) {
  for (const char* text : {"Hello 👋 world 🌍!", "\xf0\x9f\xa7\x91\xf0\x9f\x8f\xbf\xe2\x80\x8d\xf0\x9f\x92\xbb", "漢字かなカナ", "a  b\n\nc"})
    expect_stream_equals_decode(gemma(), text);
}

// A rare 4-byte character (U+10000) that the byte-level vocabulary spells with several byte tokens.
const char* const kRare = "\xf0\x90\x80\x80";

TEST(StreamingDecoder, holds_incomplete_bytes_until_complete) {
  const auto ids = qwen().encode(kRare, false);
  ASSERT_GT(ids.size(), 1u);
  sanctum::StreamingDecoder stream(qwen());
  std::string out;
  for (size_t k = 0; k + 1 < ids.size(); ++k) EXPECT_EQ(stream.push(ids[k]), "");
  out += stream.push(ids.back());
  EXPECT_EQ(out, kRare);
}

TEST(StreamingDecoder, flush_replaces_a_dangling_partial_sequence) {
  const auto ids = qwen().encode(kRare, false);
  ASSERT_GT(ids.size(), 1u);
  sanctum::StreamingDecoder stream(qwen());
  EXPECT_EQ(stream.push(ids[0]), "");
  EXPECT_EQ(stream.flush(), "\xef\xbf\xbd");
}

TEST(TokenizerErrors, invalid_utf8_names_the_offset) {
  try {
    qwen().encode("ab\xff");
    FAIL() << "expected an error";
  } catch (const sanctum::Error& e) {
    EXPECT_EQ(e.kind(), sanctum::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find("offset 2"), std::string::npos);
  }
  EXPECT_THROW(qwen().encode("\xed\xa0\x80"), sanctum::Error);  // UTF-8 encoded lone surrogate
  EXPECT_THROW(qwen().encode("\xc0\xaf"), sanctum::Error);      // overlong
}

TEST(TokenizerErrors, malformed_json_is_invalid_input) {
  for (const char* bad : {"", "{", "[]", R"({"model": {"type": "Unigram", "vocab": []}})",
                          R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})",
                          R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "Nope"}})"}) {
    EXPECT_THROW(sanctum::Tokenizer::from_json(bad), sanctum::Error) << bad;
  }
}

// A tiny hand-written tokenizer: Metaspace pre-tokenizer, byte fallback, added token with lstrip/rstrip.
TEST(Tokenizer, metaspace_byte_fallback_and_stripping_added_tokens) {
  const char* json = R"({
    "added_tokens": [{"id": 7, "content": "<sep>", "special": true, "lstrip": true, "rstrip": true,
                      "single_word": false, "normalized": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"},
                                                  {"type": "ByteFallback"}, {"type": "Fuse"}]},
    "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>",
              "vocab": {"<unk>": 0, "\u2581": 1, "a": 2, "b": 3, "\u2581a": 4, "<0xC3>": 5, "<0xA9>": 6, "\u2581ab": 8},
              "merges": ["\u2581 a", "\u2581a b"]}})";
  const auto tok = sanctum::Tokenizer::from_json(json);
  EXPECT_EQ(tok.encode("ab a", false), (std::vector<int32_t>{8, 4}));
  EXPECT_EQ(tok.encode("a  <sep>  b", false), (std::vector<int32_t>{4, 7, 1, 3}));
  EXPECT_EQ(tok.encode("\xc3\xa9", false), (std::vector<int32_t>{1, 5, 6}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 5, 6}), "\xc3\xa9");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{8, 4}), "ab a");
}

}  // namespace
