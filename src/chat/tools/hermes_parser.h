#pragma once
// Hermes-style tool calls (Qwen2.5, Qwen3): <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>,
// possibly several. A call is held until its closing tag (or the end of output) and emitted whole
// when its body is a JSON object with a string "name" and object "arguments" (a JSON string holding
// an object is accepted too); anything else is content, tags included.
#include "chat/tools/tool_call_parser.h"

namespace sanctum {

class HermesParser : public ToolCallParser {
 public:
  explicit HermesParser(ToolCallIds ids) : ToolCallParser(std::move(ids)) {}

 private:
  void consume(bool at_end) override;
  bool in_call_ = false;
};

// {"name", "arguments"} -> (name, arguments as compact JSON text); nullopt when it is not a call.
std::optional<std::pair<std::string, std::string>> read_json_call(const nlohmann::ordered_json& call);

}  // namespace sanctum
