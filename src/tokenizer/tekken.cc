// Mistral tekken.json: tiktoken-style byte-level BPE given as ranked byte strings. Special tokens take
// ids [0, num_special), ordinary token of rank r takes id num_special + r. Merging joins the adjacent
// pair whose concatenation has the lowest rank, which is BPE with one merge per (left, right) split.
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/loader.h"
#include "tokenizer/tokenizer.h"

namespace sanctum {

using json = nlohmann::json;

namespace {

std::string base64_decode(const std::string& in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const int v = value(c);
    if (v < 0) fail(ErrorKind::invalid_input, "tekken.json: token_bytes is not base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

// clang-format off
const char* const kDefaultSpecials[] = {"<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]",
                                        "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]",
                                        "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
                                        "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]"};
// clang-format on

}  // namespace

Tokenizer Tokenizer::from_tekken(std::string_view tekken_json) {
  json root;
  try {
    root = json::parse(tekken_json);
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_input, std::string("tekken.json: malformed JSON (") + e.what() + ")");
  }
  try {
    const json& config = root.at("config");
    const std::string pattern = config.at("pattern").get<std::string>();
    const int32_t num_special = config.value("default_num_special_tokens", 1000);
    const int32_t vocab_size = config.value("default_vocab_size", 131072);
    const int32_t num_ordinary = vocab_size - num_special;
    if (num_special < 0 || num_ordinary <= 0) fail(ErrorKind::invalid_input, "tekken.json: bad vocabulary sizes");

    TokenMap vocab;
    std::vector<std::string> id_to_token(static_cast<size_t>(vocab_size));
    std::vector<std::string> by_rank(static_cast<size_t>(num_ordinary));
    for (const json& entry : root.at("vocab")) {
      const int32_t rank = entry.at("rank").get<int32_t>();
      if (rank < 0 || rank >= num_ordinary) continue;  // beyond the configured vocabulary
      std::string bytes = base64_decode(entry.at("token_bytes").get<std::string>());
      if (bytes.empty()) fail(ErrorKind::invalid_input, "tekken.json: empty token at rank " + std::to_string(rank));
      const int32_t id = num_special + rank;
      id_to_token[id] = byte_level::encode(bytes);
      vocab.emplace(bytes, id);
      by_rank[rank] = std::move(bytes);
    }
    std::vector<Bpe::Merge> merges;
    for (int32_t rank = 0; rank < num_ordinary; ++rank) {
      const std::string& t = by_rank[rank];
      for (size_t k = 1; k < t.size(); ++k) {
        auto a = vocab.find(std::string_view(t).substr(0, k));
        auto b = vocab.find(std::string_view(t).substr(k));
        if (a != vocab.end() && b != vocab.end()) merges.push_back({a->second, b->second, rank, num_special + rank});
      }
    }
    std::vector<AddedToken> specials;
    std::vector<bool> seen(static_cast<size_t>(num_special), false);
    if (root.contains("special_tokens")) {
      for (const json& s : root["special_tokens"]) {
        const int32_t rank = s.at("rank").get<int32_t>();
        if (rank < 0 || rank >= num_special) continue;
        specials.push_back({s.at("token_str").get<std::string>(), rank, true, false, false, false, false});
        seen[rank] = true;
      }
    } else {
      for (int32_t r = 0; r < static_cast<int32_t>(std::size(kDefaultSpecials)) && r < num_special; ++r) {
        specials.push_back({kDefaultSpecials[r], r, true, false, false, false, false});
        seen[r] = true;
      }
    }
    for (int32_t r = 0; r < num_special; ++r)
      if (!seen[r]) specials.push_back({"<SPECIAL_" + std::to_string(r) + ">", r, true, false, false, false, false});

    Bpe::Options options;
    options.ignore_merges = true;
    options.raw_bytes = true;
    Tokenizer t;
    TokenizerLoader::set_from_tekken(t, std::make_unique<Bpe>(std::move(vocab), std::move(merges), options), std::move(id_to_token),
                                     std::move(specials), pattern);
    const int32_t bos = t.token_to_id("<s>"), eos = t.token_to_id("</s>");
    t.bos_id_ = bos;
    t.eos_id_ = eos;
    t.bos_token_ = bos >= 0 ? "<s>" : "";
    t.eos_token_ = eos >= 0 ? "</s>" : "";
    if (eos >= 0) t.eos_ids_ = {eos};
    t.add_bos_ = bos >= 0;
    return t;
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_input, std::string("tekken.json: unexpected structure (") + e.what() + ")");
  }
}

}  // namespace sanctum
