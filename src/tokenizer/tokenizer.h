#pragma once
// Tokenizer: a checkpoint's tokenizer.json (or Mistral tekken.json) with Hugging Face `tokenizers`
// semantics: added tokens, normalizer, pre-tokenizer, BPE, post-processor, decoder.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe.h"

namespace sanctum {

class Normalizer;
class PreTokenizer;
class Decoder;

class Tokenizer {
 public:
  // dir holds tokenizer.json (or tokenizer.json.gz, or tekken.json) and optionally tokenizer_config.json,
  // chat_template.jinja and generation_config.json. Throws Error naming the file on any problem.
  static Tokenizer load(const std::string& dir);
  // From the text of a tokenizer.json (tests, fuzzing); `config_json` may be empty.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {});
  // From the text of a tekken.json.
  static Tokenizer from_tekken(std::string_view tekken_json);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Throws Error(invalid_input) when text is not valid UTF-8. parse_special=false leaves special-token
  // strings in the text as ordinary text (HF split_special_tokens=True).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true, bool parse_special = true) const;
  // Unknown ids are skipped; invalid byte sequences become U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // Like decode, but invalid or incomplete byte sequences stay raw (for the streaming decoder).
  std::string decode_raw(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t token_to_id(std::string_view token) const;  // -1 if absent
  std::optional<std::string> id_to_token(int32_t id) const;
  size_t vocab_size() const;
  bool is_special(int32_t id) const;

  // As the checkpoint declares them (tokenizer_config.json / generation_config.json); -1 / empty when absent.
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }  // every id that ends generation
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }
  bool add_bos() const { return add_bos_; }
  const std::string& chat_template() const { return chat_template_; }

 private:
  Tokenizer();
  void finish_config(std::string_view config_json);
  void encode_text(std::string_view text, bool first, std::vector<int32_t>& out) const;
  std::string decode_impl(std::span<const int32_t> ids, bool skip_special_tokens, bool raw) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<Bpe> model_;
  AddedVocab added_;
  std::vector<std::string> id_to_token_;          // model vocabulary in stored (alphabet) form
  bool raw_bytes_ = false;                        // model keys are raw bytes
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // post-processor, single sequence

  int32_t bos_id_ = -1, eos_id_ = -1;
  std::vector<int32_t> eos_ids_;
  std::string bos_token_, eos_token_, chat_template_;
  bool add_bos_ = false;

  friend struct TokenizerLoader;
};

}  // namespace sanctum
