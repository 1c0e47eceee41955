#pragma once
// The GenerationSink that turns token ids into what a client sees: incremental detokenization,
// stop strings (never emitted, matched across flushes), the <think> split, tool calls and logprobs.
// It runs on the engine thread and hands batched deltas to the HTTP thread through a small channel.
// Tool calls are parsed from the content only, after the reasoning split (as vLLM does): a call
// written inside <think>...</think> stays reasoning text; one right after the block is a call.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "chat/reasoning_splitter.h"
#include "chat/tools/tool_call_parser.h"
#include "engine/engine.h"
#include "engine/stop_matcher.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::server {

// A piece of one tool call: the first piece of a call carries its id and name, later ones only
// more of its JSON arguments.
struct ToolCallDelta {
  int index = 0;
  std::string id, name;  // set on the call's first piece only
  std::string arguments;
};

struct ChoiceDelta {
  int index = 0;
  std::string content, reasoning;
  std::vector<ToolCallDelta> tool_calls;
  std::vector<TokenOutput> logprobs;         // tokens whose text is in this delta (when asked for)
  std::optional<std::string> finish_reason;  // "stop" | "length" | "tool_calls" on a choice's last delta
  std::string stop_string;                   // on the last delta: the stop string that ended the choice, if one did
  bool cancelled = false;                    // the choice ended because the job was cancelled
  int completion_tokens = 0;                 // on the last delta: every token generated for the choice
  double prefill_seconds = 0.0;              // on the last delta: in-process prefill + first sample
};

struct SinkEvent {
  bool done = false;  // the job ended; `error` set on an internal fault
  std::string error;
  ChoiceDelta delta;
};

struct TextSinkOptions {
  const Tokenizer* tokenizer = nullptr;
  std::vector<std::string> stop;
  std::vector<int32_t> hidden_ids;  // EOS and stop ids: end the text, never part of it
  bool skip_special_tokens = true;
  bool want_logprobs = false;
  int flush_tokens = 1;  // tokens per delta while streaming
  bool split_reasoning = false;
  bool start_in_reasoning = false;
  // Tool calls: parsed from the content when a parser is set and tools were offered.
  ToolParserKind tool_parser = ToolParserKind::none;
  nlohmann::ordered_json tools;     // the offered tools (argument types for the XML format)
  bool parallel_tool_calls = true;  // false: calls after the first are dropped
  uint64_t tool_call_seed = 0;      // call ids
  int n = 1;
  Histogram* time_to_first_token = nullptr;
  std::chrono::steady_clock::time_point arrived;
};

class TextSink : public GenerationSink {
 public:
  explicit TextSink(TextSinkOptions options);

  bool on_token(int choice, const TokenOutput& token) override;
  void on_choice_end(int choice, const GenerationResult& result) override;
  void on_done(const std::string& error) override;

  // HTTP side: waits up to `timeout` for events and takes them all (empty on timeout).
  std::vector<SinkEvent> take(std::chrono::milliseconds timeout);

 private:
  struct Choice {
    std::unique_ptr<StreamingDecoder> decoder;
    StopMatcher stop;
    ReasoningSplitter reasoning;
    std::unique_ptr<ToolCallParser> tools;  // null: content passes through
    ChoiceDelta pending;
    int unflushed = 0;
    int generated = 0;
    int calls = 0;  // tool calls returned
    bool stopped = false;
  };
  void append(Choice& c, const StopMatcher::Result& r);
  void add_content(Choice& c, std::string_view text);
  void add_tool_events(Choice& c, const std::vector<ToolCallEvent>& events);
  void emit(Choice& c);

  TextSinkOptions opt_;
  std::vector<Choice> choices_;
  bool first_token_seen_ = false;

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<SinkEvent> events_;
};

}  // namespace sanctum::server
