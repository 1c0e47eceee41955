#include "grammar/compile.h"

#include "grammar/grammar_text.h"

namespace sanctum::grammar {

CompiledGrammar compile_json_schema(const SchemaJson& schema, std::shared_ptr<const Vocabulary> vocab, const JsonGrammarOptions& options,
                                    MaskBudget budget) {
  return CompiledGrammar(json_schema_grammar(schema, options), std::move(vocab), budget);
}

CompiledGrammar compile_json_schema(const nlohmann::json& schema, std::shared_ptr<const Vocabulary> vocab,
                                    const JsonGrammarOptions& options, MaskBudget budget) {
  return compile_json_schema(SchemaJson(schema), std::move(vocab), options, budget);
}

CompiledGrammar compile_json_object(std::shared_ptr<const Vocabulary> vocab, const JsonGrammarOptions& options, MaskBudget budget) {
  return CompiledGrammar(json_object_grammar(options), std::move(vocab), budget);
}

CompiledGrammar compile_grammar_text(std::string_view text, std::shared_ptr<const Vocabulary> vocab, MaskBudget budget) {
  return CompiledGrammar(parse_grammar_text(text), std::move(vocab), budget);
}

}  // namespace sanctum::grammar
