#pragma once
// Internal: builds Tokenizer internals (friend of Tokenizer). Used by tokenizer_load.cc and tekken.cc.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/tokenizer.h"

namespace sanctum {

struct TokenizerLoader {
  static void build(Tokenizer& t, const nlohmann::json& root);
  static void post_processor(Tokenizer& t, const nlohmann::json& spec, const nlohmann::json& root);
  static void set_from_tekken(Tokenizer& t, std::unique_ptr<Bpe> model, std::vector<std::string> id_to_token,
                              std::vector<AddedToken> specials, const std::string& pattern);
};

}  // namespace sanctum
