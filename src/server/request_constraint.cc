#include "server/request_constraint.h"

#include <algorithm>

#include "grammar/compile.h"
#include "server/api_error.h"
#include "server/grammar_cache.h"
#include "server/tool_grammar.h"

namespace sanctum::server {

namespace {

std::string kind_name(OutputFormat::Kind kind) {
  switch (kind) {
    case OutputFormat::Kind::text: return "text";
    case OutputFormat::Kind::json_object: return "json_object";
    case OutputFormat::Kind::json_schema: return "json_schema";
    case OutputFormat::Kind::grammar: return "grammar";
  }
  return "text";
}

grammar::CompiledGrammar format_grammar(const ServedModel& m, const OutputFormat& f) {
  // The canonical text: the kind, then the schema as sent (its key order is part of the grammar).
  const std::string key = kind_name(f.kind) + "\n" + (f.kind == OutputFormat::Kind::grammar ? f.grammar : f.schema.dump());
  try {
    return m.grammars->get(key, [&] {
      auto vocab = m.grammars->vocabulary();
      const grammar::MaskBudget budget = m.grammars->mask_budget();
      switch (f.kind) {
        case OutputFormat::Kind::json_object: return grammar::compile_json_object(vocab, {}, budget);
        case OutputFormat::Kind::json_schema: return grammar::compile_json_schema(f.schema, vocab, {}, budget);
        default: return grammar::compile_grammar_text(f.grammar, vocab, budget);
      }
    });
  } catch (const grammar::GrammarError& e) {
    const std::string what = f.kind == OutputFormat::Kind::grammar ? "the grammar" : "the JSON schema";
    throw bad_request("'" + f.param + "': " + what + " cannot be enforced (unsupported: " + e.feature() + "): " + e.what(), f.param,
                      "unsupported_schema");
  }
}

// The prompt closed an (empty) reasoning block itself, as templates do with enable_thinking false:
// the answer starts now, with no block of its own.
bool ends_with_closed_reasoning(const Tokenizer& tok, const std::vector<int32_t>& ids, int32_t close) {
  const auto last = std::find(ids.rbegin(), ids.rend(), close);
  if (last == ids.rend()) return false;
  const std::string tail = tok.decode_raw(std::span<const int32_t>(last.base(), ids.end()));
  return tail.find_first_not_of(" \t\r\n") == std::string::npos;
}

bool forces_a_call(const OpenAiRequest& r) {
  return r.chat && !r.tools.offered().is_null() && (r.tools.choice == ToolChoice::required || r.tools.choice == ToolChoice::named);
}

// Tools under "auto" with strict tools or a response_format: calls are constrained too.
bool calls_under_auto(const OpenAiRequest& r) {
  return r.chat && !r.tools.offered().is_null() && r.tools.choice == ToolChoice::automatic &&
         (r.tools.strict || r.format.kind != OutputFormat::Kind::text);
}

// The tool-call grammar, and (strict tools under "auto") the token that opens a call.
grammar::CompiledGrammar tools_grammar(const ServedModel& m, const OpenAiRequest& r, bool lead_blank_lines, int32_t& trigger) {
  const Tokenizer& tok = *m.tokenizer;
  ToolGrammarRequest g;
  g.format = m.tool_parser;
  g.tools = &r.tools.offered();
  g.only = r.tools.choice == ToolChoice::named ? r.tools.named : "";
  g.parallel = r.tools.parallel;
  g.strict_only = r.tools.choice == ToolChoice::automatic;
  // With a response_format the answer is calls or the format's value from the first token; with
  // strict tools alone the text is free until the model opens a call.
  static const RequestJson kAnyObject = {{"type", "object"}, {"additionalProperties", true}};
  if (r.format.kind == OutputFormat::Kind::json_object) g.answer_schema = &kAnyObject;
  if (r.format.kind == OutputFormat::Kind::json_schema) g.answer_schema = &r.format.schema;
  g.opened = g.strict_only && !g.answer_schema;
  g.lead_blank_lines = lead_blank_lines && !g.opened;
  g.mistral_args_tag = tok.token_to_id("[ARGS]") >= 0;
  const std::string open = tool_call_open_tag(g.format);
  if (g.opened) {
    trigger = tok.token_to_id(open);
    if (trigger < 0)
      throw bad_request("strict tools under tool_choice \"auto\" are enforced from the call's opening tag, and '" + open +
                            "' is not one token of this model's vocabulary; send tool_choice \"required\" or strict: false",
                        "tools", "unsupported_parameter");
  }
  // Tags that are special tokens ([TOOL_CALLS], [ARGS]) are written as their text under the grammar.
  std::vector<int32_t> specials;
  for (const char* tag : {"[TOOL_CALLS]", "[ARGS]", "<tool_call>", "</tool_call>"})
    if (const int32_t id = tok.token_to_id(tag); id >= 0 && tok.is_special(id)) specials.push_back(id);
  std::string key = "tools\n" + std::string(tool_parser_name(g.format)) + (g.parallel ? " parallel" : " one") +
                    (g.strict_only ? " strict" : " all") + (g.lead_blank_lines ? " lead" : "") + (g.mistral_args_tag ? " args" : "") +
                    "\n" + g.only + "\n" + g.tools->dump() + "\n" + (g.answer_schema ? g.answer_schema->dump() : "");
  return m.grammars->get(key, [&] {
    return grammar::CompiledGrammar(tool_call_grammar(g), m.grammars->vocabulary(specials), m.grammars->mask_budget());
  });
}

}  // namespace

std::shared_ptr<const OutputConstraint> request_constraint(const ServedModel& m, const OpenAiRequest& r, const BuiltPrompt& prompt) {
  auto c = std::make_shared<OutputConstraint>();
  const int64_t vocab = m.engine->model().vocab_size();
  for (const auto& [id, bias] : r.logit_bias)
    if (id >= vocab)
      throw bad_request("Invalid key in 'logit_bias': '" + std::to_string(id) + "' is outside this model's vocabulary [0, " +
                            std::to_string(vocab) + ")",
                        "logit_bias");
  c->logit_bias = r.logit_bias;

  if (forces_a_call(r) && r.format.kind != OutputFormat::Kind::text)
    throw bad_request(
        "'response_format' cannot be combined with tool_choice \"required\" or a named function: the answer is a tool "
        "call; send one or the other",
        "response_format", "unsupported_parameter");
  const bool tools = forces_a_call(r) || calls_under_auto(r);
  // A reasoning model thinks freely: the grammar starts after its reasoning block.
  if (r.chat && m.prompts->thinking() && (tools || r.format.kind != OutputFormat::Kind::text)) {
    c->close_reasoning = m.tokenizer->token_to_id("</think>");
    if (prompt.start_in_reasoning) c->in_reasoning = true;
    else if (!ends_with_closed_reasoning(*m.tokenizer, prompt.ids, c->close_reasoning))
      c->open_reasoning = m.tokenizer->token_to_id("<think>");
  }
  if (tools) c->grammar = tools_grammar(m, r, c->in_reasoning, c->trigger);
  else if (r.format.kind != OutputFormat::Kind::text) c->grammar = format_grammar(m, r.format);
  if (!c->grammar && c->logit_bias.empty()) return nullptr;
  return c;
}

}  // namespace sanctum::server
