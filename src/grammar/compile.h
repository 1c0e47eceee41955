#pragma once
// Entry points for the request path: a response_format, tool arguments or a grammar text, compiled
// against the serving model's vocabulary. Each throws GrammarError (a 400 naming the feature) for
// anything it cannot enforce. `budget` bounds the masks the grammar keeps (compiled_grammar.h).
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema.h"
#include "grammar/vocabulary.h"

namespace sanctum::grammar {

CompiledGrammar compile_json_schema(const SchemaJson& schema, std::shared_ptr<const Vocabulary> vocab,
                                    const JsonGrammarOptions& options = {}, MaskBudget budget = {});
// The same for a schema parsed without key order (properties then come in sorted order).
CompiledGrammar compile_json_schema(const nlohmann::json& schema, std::shared_ptr<const Vocabulary> vocab,
                                    const JsonGrammarOptions& options = {}, MaskBudget budget = {});
CompiledGrammar compile_json_object(std::shared_ptr<const Vocabulary> vocab, const JsonGrammarOptions& options = {},
                                    MaskBudget budget = {});
CompiledGrammar compile_grammar_text(std::string_view text, std::shared_ptr<const Vocabulary> vocab, MaskBudget budget = {});

}  // namespace sanctum::grammar
