#pragma once
// Grammars of tool calls in the model's own format, so that tool_choice "required" / a named
// function and `strict: true` tools hold the model to a call our parser reads (chat/tools/) with
// arguments that follow each tool's `parameters` schema. What each format writes, as the templates
// render calls:
//   qwen_xml  <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//             VALUE as the parser converts it back: text for string parameters (never containing a
//             closing or opening tag), JSON for the others; parameters in schema order, required ones always
//   hermes    <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
//   mistral   [TOOL_CALLS]NAME[ARGS]{...} (tokenizers with an [ARGS] token), else
//             [TOOL_CALLS][{"name": NAME, "arguments": {...}}, ...]
// Calls are separated as the templates separate them; parallel_tool_calls=false allows exactly one.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/tools/tool_call_parser.h"
#include "grammar/grammar.h"

namespace sanctum::server {

struct ToolGrammarRequest {
  ToolParserKind format = ToolParserKind::none;
  const nlohmann::ordered_json* tools = nullptr;  // the offered `tools`
  std::string only;                               // a named function: its calls alone
  bool parallel = true;                           // one or more calls; false: exactly one
  // The first call's start tag (<tool_call>, [TOOL_CALLS]) is already written: strict tools under
  // tool_choice "auto", where the grammar starts once the model opens a call.
  bool opened = false;
  // Only tools with strict: true get arguments of their schema; the others any JSON object (any
  // parameters in the XML form). Off: every tool's schema holds (required / named).
  bool strict_only = false;
  bool mistral_args_tag = false;  // mistral: the NAME[ARGS]{...} form (the tokenizer has [ARGS])
  // Up to two blank characters before the first call: the newlines a template writes after a
  // reasoning block (the reasoning split drops them; elsewhere they would be content).
  bool lead_blank_lines = false;
  // response_format with tools under "auto": the answer is either calls or a JSON value of this
  // schema (its errors name response_format). Null: calls only.
  const nlohmann::ordered_json* answer_schema = nullptr;
};

// Throws ApiError 400 naming the tool's field (tools[i].function.parameters) and the schema feature
// that cannot be enforced.
std::shared_ptr<const grammar::Grammar> tool_call_grammar(const ToolGrammarRequest& request);

// The text that opens a call in `format` ("<tool_call>", "[TOOL_CALLS]").
const char* tool_call_open_tag(ToolParserKind format);

}  // namespace sanctum::server
