#pragma once
// Tool calls in streamed model output: one incremental parser per format the served families emit
// (Qwen3.5 / Qwen3-Coder XML, Hermes JSON in <tool_call>, Mistral [TOOL_CALLS]). Text goes in piece
// by piece, events come out: plain content, a call's start (index, id, name), fragments of its JSON
// arguments, its end. Tags split across pieces are held until whole, so the events never depend on
// the chunking. Malformed output never throws: what cannot be read as a call stays content.
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace sanctum {

class Tokenizer;

struct ToolCallEvent {
  enum class Kind { content, call_begin, arguments, call_end };
  Kind kind = Kind::content;
  int index = 0;         // the call's position in the answer (call_* kinds)
  std::string text;      // content text, or an arguments fragment
  std::string id, name;  // call_begin only
};

enum class ToolParserKind { none, qwen_xml, hermes, mistral };

// "qwen_xml" | "hermes" | "mistral" | "none"; nullopt for anything else.
std::optional<ToolParserKind> tool_parser_from_name(std::string_view name);
const char* tool_parser_name(ToolParserKind kind);

// The format a checkpoint's chat template teaches: "<function=" -> qwen_xml, "<tool_call>" -> hermes,
// a "[TOOL_CALLS]" token in the vocabulary -> mistral, else none.
ToolParserKind detect_tool_parser(std::string_view chat_template, const Tokenizer& tokenizer);

// Call ids: "call_" + 24 letters and digits; Mistral templates refuse any id that is not exactly
// 9 letters and digits (mistral-common's rule), so the mistral format gets those.
class ToolCallIds {
 public:
  ToolCallIds(ToolParserKind kind, uint64_t seed) : mistral_(kind == ToolParserKind::mistral), rng_(seed) {}
  std::string next();

 private:
  bool mistral_;
  std::mt19937_64 rng_;
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  // Feed the next piece of output; returns what is now certain.
  std::vector<ToolCallEvent> push(std::string_view text);
  // End of output: a call left open is closed if what was read of it is whole, else its text is content.
  std::vector<ToolCallEvent> finish();
  int calls() const { return calls_; }  // calls started so far

 protected:
  explicit ToolCallParser(ToolCallIds ids) : ids_(std::move(ids)) {}
  virtual void consume(bool at_end) = 0;  // works through held_, appending to out_

  void content(std::string_view text);
  void begin_call(std::string name);
  void arguments(std::string_view fragment);
  void end_call();
  // Emits the content before `tag` and drops it with the tag: true. Without the tag, emits what cannot
  // be the tag's start and returns false. Whitespace alone right after a call (between calls, after
  // the last) is not content.
  bool take_text_until(std::string_view tag, bool at_end);

  std::string held_;  // text not yet turned into events

 private:
  ToolCallIds ids_;
  std::vector<ToolCallEvent> out_;
  int calls_ = 0;
  bool after_call_ = false;  // a call ended and no content came since
};

// tools: the request's validated `tools` array (argument types for the XML format come from it).
// Returns nullptr for ToolParserKind::none.
std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolParserKind kind, const nlohmann::ordered_json& tools, uint64_t seed);

// Length of the longest tail of `s` that is a proper prefix of `tag` (a tag maybe still arriving).
size_t partial_tag_tail(std::string_view s, std::string_view tag);

}  // namespace sanctum
