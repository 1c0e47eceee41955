#pragma once
// Model output as tokens of a real tokenizer (Qwen3's) through the chat sink, configured as the
// handlers configure it: the deltas a streamed request gets (one token each) and the one delta of a
// whole request. The API shapes built on top of the chat path are tested on these.
#include <chrono>
#include <string>
#include <vector>

#include "server/text_sink.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::server::testing {

inline const Tokenizer& qwen3_tokenizer() {
  static const Tokenizer t = Tokenizer::load(SANCTUM_TEST_DATA_DIR "/tokenizers/qwen3");
  return t;
}

inline const nlohmann::ordered_json& scripted_tools() {
  static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");
  return tools;
}

struct ScriptedRun {
  std::vector<ChoiceDelta> stream;  // one per token, the last with finish_reason
  ChoiceDelta whole;                // everything in one
};

// `finish` is how the engine ended the choice when the sink did not stop it (a stop string does).
inline ScriptedRun run_scripted(const std::string& output, FinishReason finish = FinishReason::stop, std::vector<std::string> stop = {},
                                ToolParserKind parser = ToolParserKind::hermes) {
  const Tokenizer& tok = qwen3_tokenizer();
  const std::vector<int32_t> ids = tok.encode(output, /*add_special_tokens=*/false, /*parse_special=*/true);
  ScriptedRun run;
  for (bool stream : {true, false}) {
    TextSinkOptions so;
    so.tokenizer = &tok;
    so.stop = stop;
    so.skip_special_tokens = false;
    so.flush_tokens = stream ? 1 : 1 << 30;
    so.split_reasoning = true;
    so.tool_parser = parser;
    so.tools = scripted_tools();
    so.tool_call_seed = 7;
    TextSink sink(so);
    GenerationResult result;
    result.finish = finish;
    for (int32_t id : ids) {
      TokenOutput t;
      t.token = id;
      result.tokens.push_back(id);
      if (!sink.on_token(0, t)) {
        result.finish = FinishReason::stop;
        break;
      }
    }
    sink.on_choice_end(0, result);
    sink.on_done("");
    for (SinkEvent& e : sink.take(std::chrono::milliseconds(0))) {
      if (e.done) continue;
      if (stream) run.stream.push_back(std::move(e.delta));
      else run.whole = std::move(e.delta);
    }
  }
  return run;
}

}  // namespace sanctum::server::testing
