#pragma once
// The GenerationSink that turns token ids into what a client sees: incremental detokenization,
// stop strings (never emitted, matched across flushes), the <think> split and logprobs. It runs on
// the engine thread and hands batched deltas to the HTTP thread through a small channel.
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
#include "engine/stop_matcher.h"
#include "engine/engine.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::server {

struct ChoiceDelta {
  int index = 0;
  std::string content, reasoning;
  std::vector<TokenOutput> logprobs;         // tokens whose text is in this delta (when asked for)
  std::optional<std::string> finish_reason;  // "stop" | "length" on a choice's last delta
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
    ChoiceDelta pending;
    int unflushed = 0;
    int generated = 0;
    bool stopped = false;
  };
  void append(Choice& c, const StopMatcher::Result& r);
  void emit(Choice& c);

  TextSinkOptions opt_;
  std::vector<Choice> choices_;
  bool first_token_seen_ = false;

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<SinkEvent> events_;
};

}  // namespace sanctum::server
