// libFuzzer: arbitrary model output through every tool-call parser. The first byte picks where the
// text is cut in two; nothing may throw or crash, every call must begin before its arguments and end,
// and the cut must not change the outcome (content and calls are the same as for the whole text).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "chat/tools/tool_call_parser.h"

namespace {

struct Outcome {
  std::string content;
  std::string calls;  // name \x1f arguments \x1e, per call
};

Outcome run(sanctum::ToolParserKind kind, const nlohmann::ordered_json& tools, std::string_view a, std::string_view b) {
  auto parser = sanctum::make_tool_call_parser(kind, tools, 1);
  Outcome out;
  int open = -1;
  auto fold = [&](const std::vector<sanctum::ToolCallEvent>& events) {
    for (const auto& e : events) {
      switch (e.kind) {
        case sanctum::ToolCallEvent::Kind::content: out.content += e.text; break;
        case sanctum::ToolCallEvent::Kind::call_begin:
          if (open >= 0) std::abort();  // a call began inside another
          open = e.index;
          out.calls += e.name + "\x1f";
          break;
        case sanctum::ToolCallEvent::Kind::arguments:
          if (open != e.index) std::abort();
          out.calls += e.text;
          break;
        case sanctum::ToolCallEvent::Kind::call_end:
          if (open != e.index) std::abort();
          open = -1;
          out.calls += "\x1e";
          break;
      }
    }
  };
  fold(parser->push(a));
  fold(parser->push(b));
  fold(parser->finish());
  if (open >= 0) std::abort();  // finish() must close every call
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
      "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
      "o": {"type": "object"}, "a": {"type": "array"}}}}}])");
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = text.empty() ? 0 : data[0] % (text.size() + 1);
  for (auto kind : {sanctum::ToolParserKind::qwen_xml, sanctum::ToolParserKind::hermes, sanctum::ToolParserKind::mistral}) {
    const Outcome whole = run(kind, tools, text, "");
    const Outcome split = run(kind, tools, text.substr(0, cut), text.substr(cut));
    if (whole.content != split.content || whole.calls != split.calls) std::abort();
  }
  return 0;
}
