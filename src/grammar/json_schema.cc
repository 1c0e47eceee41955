#include "grammar/json_schema.h"

#include <map>
#include <set>

#include "grammar/json_builder.h"

namespace sanctum::grammar {

std::shared_ptr<const Grammar> json_schema_grammar(const SchemaJson& schema, const JsonGrammarOptions& options) {
  auto g = std::make_shared<Grammar>(options.limits);
  JsonBuilder builder(*g, schema, options);
  const Item value = builder.value(schema, "#", 0);
  const uint32_t root = g->add_rule("root", {{builder.ws(), value, builder.ws()}});
  g->finish(root);
  return g;
}

std::shared_ptr<const Grammar> json_object_grammar(const JsonGrammarOptions& options) {
  auto g = std::make_shared<Grammar>(options.limits);
  const SchemaJson schema = {{"type", "object"}, {"additionalProperties", true}};
  JsonBuilder builder(*g, schema, options);
  const Item value = builder.value(schema, "#", 0);
  const uint32_t root = g->add_rule("root", {{builder.ws(), value, builder.ws()}});
  g->finish(root);
  return g;
}

}  // namespace sanctum::grammar
