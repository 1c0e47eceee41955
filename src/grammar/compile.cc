#include "grammar/compile.h"

#include "grammar/grammar_text.h"

namespace sanctum::grammar {

CompiledGrammar compile_json_schema(const SchemaJson& schema, std::shared_ptr<const Vocabulary> vocab, const JsonGrammarOptions& options) {
  return CompiledGrammar(json_schema_grammar(schema, options), std::move(vocab));
}

CompiledGrammar compile_json_schema(const nlohmann::json& schema, std::shared_ptr<const Vocabulary> vocab,
                                    const JsonGrammarOptions& options) {
  return compile_json_schema(SchemaJson(schema), std::move(vocab), options);
}

CompiledGrammar compile_json_object(std::shared_ptr<const Vocabulary> vocab, const JsonGrammarOptions& options) {
  return CompiledGrammar(json_object_grammar(options), std::move(vocab));
}

CompiledGrammar compile_grammar_text(std::string_view text, std::shared_ptr<const Vocabulary> vocab) {
  return CompiledGrammar(parse_grammar_text(text), std::move(vocab));
}

}  // namespace sanctum::grammar
