#pragma once
// The tool-calling part of a chat request: `tools`, `tool_choice`, `parallel_tool_calls`, and the
// assistant `tool_calls` / `role: "tool"` messages of earlier turns, validated (400s name the
// offending path) and shaped the way transformers' apply_chat_template expects them, as vLLM does:
// a call's `arguments`, a JSON string on the wire, reaches the template as a mapping.
// tool_choice "required" / a named function and `strict: true` tools are enforced by a grammar
// (server/tool_grammar.h) built when the model is known.
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace sanctum::server {

enum class ToolChoice { automatic, none, required, named };

struct ToolRequest {
  nlohmann::ordered_json tools;  // the validated `tools` array; null when none were sent
  ToolChoice choice = ToolChoice::automatic;
  std::string named;     // ToolChoice::named: the function
  bool parallel = true;  // false: only the first call of an answer is returned (and a constrained answer makes one)
  bool strict = false;   // some tool has strict: true (its calls' arguments follow its schema)
  // The tools the template sees: none with tool_choice "none", which offers no tools (as vLLM does
  // with --exclude-tools-when-tool-choice-none) and parses no calls.
  const nlohmann::ordered_json& offered() const;
};

ToolRequest parse_tool_request(const nlohmann::ordered_json& body);

// An assistant message's `tool_calls` (message index i), with each `arguments` parsed into an object.
nlohmann::ordered_json normalize_tool_calls(const nlohmann::ordered_json& tool_calls, size_t i);

// A `role: "tool"` message must name the call it answers.
void check_tool_result(const nlohmann::ordered_json& message, size_t i);

}  // namespace sanctum::server
