#include "server/text_sink.h"

#include <algorithm>

namespace sanctum::server {

TextSink::TextSink(TextSinkOptions options) : opt_(std::move(options)) {
  choices_.reserve(static_cast<size_t>(opt_.n));
  for (int i = 0; i < opt_.n; ++i) {
    choices_.push_back(Choice{std::make_unique<StreamingDecoder>(*opt_.tokenizer, opt_.skip_special_tokens), StopMatcher(opt_.stop),
                              ReasoningSplitter(opt_.split_reasoning, opt_.start_in_reasoning),
                              make_tool_call_parser(opt_.tool_parser, opt_.tools, opt_.tool_call_seed + static_cast<uint64_t>(i)),
                              ChoiceDelta{}, 0, 0, 0, false});
    choices_.back().pending.index = i;
  }
}

void TextSink::add_tool_events(Choice& c, const std::vector<ToolCallEvent>& events) {
  for (const ToolCallEvent& e : events) {
    if (e.kind == ToolCallEvent::Kind::content) {
      c.pending.content += e.text;
      continue;
    }
    if (!opt_.parallel_tool_calls && e.index > 0) continue;
    if (e.kind == ToolCallEvent::Kind::call_begin) {
      c.pending.tool_calls.push_back(ToolCallDelta{e.index, e.id, e.name, ""});
      ++c.calls;
    } else if (e.kind == ToolCallEvent::Kind::arguments) {
      if (c.pending.tool_calls.empty() || c.pending.tool_calls.back().index != e.index)
        c.pending.tool_calls.push_back(ToolCallDelta{e.index, "", "", ""});
      c.pending.tool_calls.back().arguments += e.text;
    }
  }
}

void TextSink::add_content(Choice& c, std::string_view text) {
  if (!c.tools) {
    c.pending.content += text;
    return;
  }
  if (!text.empty()) add_tool_events(c, c.tools->push(text));
}

void TextSink::append(Choice& c, const StopMatcher::Result& r) {
  ReasoningSplitter::Out out = c.reasoning.push(r.text);
  add_content(c, out.content);
  c.pending.reasoning += out.reasoning;
}

void TextSink::emit(Choice& c) {
  SinkEvent e;
  e.delta = std::move(c.pending);
  c.pending = ChoiceDelta{};
  c.pending.index = e.delta.index;
  c.unflushed = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(e));
  }
  ready_.notify_one();
}

bool TextSink::on_token(int choice, const TokenOutput& token) {
  if (!first_token_seen_) {
    first_token_seen_ = true;
    if (opt_.time_to_first_token)
      opt_.time_to_first_token->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - opt_.arrived).count());
  }
  Choice& c = choices_[static_cast<size_t>(choice)];
  ++c.generated;
  if (c.stopped) return false;
  if (std::find(opt_.hidden_ids.begin(), opt_.hidden_ids.end(), token.token) != opt_.hidden_ids.end()) return true;
  if (opt_.want_logprobs && token.has_logprobs) c.pending.logprobs.push_back(token);
  StopMatcher::Result r = c.stop.push(c.decoder->push(token.token));
  append(c, r);
  if (r.stopped) {
    c.stopped = true;
    return false;
  }
  if (++c.unflushed >= opt_.flush_tokens &&
      (!c.pending.content.empty() || !c.pending.reasoning.empty() || !c.pending.logprobs.empty() || !c.pending.tool_calls.empty()))
    emit(c);
  return true;
}

void TextSink::on_choice_end(int choice, const GenerationResult& result) {
  Choice& c = choices_[static_cast<size_t>(choice)];
  if (!c.stopped) {
    StopMatcher::Result r = c.stop.push(c.decoder->flush());
    append(c, r);
    if (r.stopped) c.stopped = true;
    else append(c, StopMatcher::Result{c.stop.flush(), false});
  }
  ReasoningSplitter::Out tail = c.reasoning.flush();
  add_content(c, tail.content);
  c.pending.reasoning += tail.reasoning;
  if (c.tools) add_tool_events(c, c.tools->finish());
  if (c.stop.stopped()) c.pending.stop_string = c.stop.matched();
  c.pending.completion_tokens = static_cast<int>(result.tokens.size());
  c.pending.prefill_seconds = result.prefill_seconds;
  const bool stopped = c.stopped || result.finish == FinishReason::stop;
  if (result.finish == FinishReason::cancelled && !c.stopped) c.pending.cancelled = true;
  else c.pending.finish_reason = !stopped ? "length" : c.calls > 0 ? "tool_calls" : "stop";
  emit(c);
}

void TextSink::on_done(const std::string& error) {
  SinkEvent e;
  e.done = true;
  e.error = error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(e));
  }
  ready_.notify_one();
}

std::vector<SinkEvent> TextSink::take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  std::vector<SinkEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

}  // namespace sanctum::server
