// libFuzzer: arbitrary template source through the Jinja-subset parser and interpreter with a small
// fixed conversation. Syntax and runtime errors must be sanctum::Error, never a crash or a hang.
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi {{ x }}"},
    {"role": "assistant", "content": "ok", "reasoning_content": "think", "tool_calls": [
      {"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": [1.5, null, true]}}}]},
    {"role": "tool", "content": "42"}])");
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    sanctum::ChatTemplate tmpl(source);
    sanctum::ChatTemplateOptions options;
    options.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
    options.extra["enable_thinking"] = false;
    options.bos_token = "<s>";
    tmpl.render(messages, options);
  } catch (const sanctum::Error&) {
  }
  return 0;
}
