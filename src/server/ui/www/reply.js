// One streamed answer as it builds up: the chunks of /v1/chat/completions folded into a message,
// and the speed figures measured from the stream.

// OpenAI streams a tool call in pieces keyed by index: the id, type and name once, the arguments
// as consecutive fragments of one JSON string.
function merge_tool_calls(message, deltas) {
  message.tool_calls ??= [];
  for (const d of deltas) {
    const i = d.index ?? message.tool_calls.length;
    const call = (message.tool_calls[i] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
    if (d.id) call.id = d.id;
    if (d.type) call.type = d.type;
    if (d.function?.name) call.function.name += d.function.name;
    if (d.function?.arguments) call.function.arguments += d.function.arguments;
  }
}

export class Reply {
  // now: a clock in milliseconds (performance.now in the page; a fake one in tests).
  constructor(message, now = () => performance.now()) {
    this.message = message;
    this.now = now;
    this.started = now();
    this.first = 0; // when the first token arrived
    this.chunks = 0; // chunks that carried text or a tool call: a token count when usage never comes
    this.usage = null;
  }

  add(chunk) {
    if (chunk.usage) this.usage = chunk.usage;
    const m = this.message;
    for (const choice of chunk.choices || []) {
      const d = choice.delta || {};
      if (d.content || d.reasoning_content || d.tool_calls) {
        if (!this.first) this.first = this.now();
        this.chunks++;
      }
      if (d.content) m.content += d.content;
      if (d.reasoning_content) m.reasoning = (m.reasoning || "") + d.reasoning_content;
      if (d.tool_calls) merge_tool_calls(m, d.tool_calls);
      if (choice.finish_reason) m.finish_reason = choice.finish_reason;
    }
  }

  // The stream ended (done, stopped or failed): time to first token, and tokens per second over
  // the time after it, since the first token arrives at `first`.
  finish() {
    delete this.message.streaming;
    if (!this.first) return;
    const tokens = this.usage?.completion_tokens ?? this.chunks;
    const decode_s = (this.now() - this.first) / 1000;
    const stats = { ttft_ms: this.first - this.started, tokens, estimated: !this.usage };
    if (tokens > 1 && decode_s > 0) stats.tokens_per_s = (tokens - 1) / decode_s;
    this.message.stats = stats;
  }
}
