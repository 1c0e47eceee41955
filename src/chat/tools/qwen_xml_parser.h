#pragma once
// Qwen3.5 / Qwen3-Coder tool calls:
//   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>\n</tool_call>
// The call starts (name streamed) as soon as its <function=NAME> tag is whole; each parameter is
// emitted as a JSON member when it closes, so the arguments fragments of a call join into one
// JSON object. A value loses one newline on each side (the template writes them) and is converted
// by the tool's JSON-schema type: integer, number, boolean, object and array are parsed, null reads
// as null for non-string types, anything that does not parse, and strings, stays text. Like vLLM's
// qwen3coder parser, a value also ends at the next <parameter= or </function>.
#include <map>

#include "chat/tools/tool_call_parser.h"

namespace sanctum {

class QwenXmlParser : public ToolCallParser {
 public:
  QwenXmlParser(ToolCallIds ids, const nlohmann::ordered_json& tools);

 private:
  enum class State { text, call_open, function_body, value, after_function };
  void consume(bool at_end) override;
  bool step(bool at_end);  // false: wait for more text
  void close_function();
  nlohmann::ordered_json convert(const std::string& key, std::string value) const;

  std::map<std::string, nlohmann::ordered_json> properties_;  // function name -> its parameters' properties
  State state_ = State::text;
  std::string function_, key_;
  int members_ = 0;  // parameters emitted in the open call
};

// How a parameter's text becomes its value, from the schema's `type` (the first that is not "null";
// none: text): kept as text, or read as an integer, a number, a boolean or any JSON, "null" reading
// as null for all but text (a grammar for constrained calls writes values that read back exactly).
enum class ParameterKind { text, integer, number, boolean, json };
ParameterKind parameter_kind(const nlohmann::ordered_json& property_schema);

// A parameter value as a JSON value of the schema's `type` (exposed for tests).
nlohmann::ordered_json convert_parameter_value(const nlohmann::ordered_json& property_schema, std::string value);

}  // namespace sanctum
