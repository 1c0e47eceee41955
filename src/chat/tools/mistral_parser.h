#pragma once
// Mistral tool calls after the [TOOL_CALLS] control token, in both forms mistral-common renders:
//   recent tokenizers: [TOOL_CALLS]NAME[ARGS]{...} (optionally NAME[CALL_ID]ID[ARGS]{...}), repeated;
//   older ones:        [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...].
// A call is emitted once its JSON is whole and parses; otherwise its text is content. The control
// tokens reach the parser only when the text is decoded with special tokens kept (the server does
// that whenever this parser is active).
#include "chat/tools/tool_call_parser.h"

namespace sanctum {

class MistralParser : public ToolCallParser {
 public:
  explicit MistralParser(ToolCallIds ids) : ToolCallParser(std::move(ids)) {}

 private:
  enum class State { text, after_marker, name, arguments, array, after_call };
  void consume(bool at_end) override;
  bool step(bool at_end);
  void give_up(std::string_view rest);  // what was read of this call is content

  State state_ = State::text;
  std::string raw_;  // text of the call being read, for give_up
  std::string name_;
};

}  // namespace sanctum
