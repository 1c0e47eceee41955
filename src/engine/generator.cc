#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace sanctum {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
  }
  return "stop";
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

GenerationResult generate(Model& model, SequenceState& state, std::span<const int32_t> prompt, const GenerationParams& params,
                          const TokenCallback& on_tokens) {
  check(!prompt.empty(), ErrorKind::invalid_argument, "generate: the prompt is empty");
  check(params.max_tokens >= 0, ErrorKind::invalid_argument, "generate: max_tokens must be >= 0");
  const int64_t vocab = model.vocab_size();
  for (int32_t id : prompt)
    check(id >= 0 && id < vocab, ErrorKind::invalid_argument,
          "prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");

  GenerationResult result;
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (params.max_tokens == 0) return result;

  std::vector<int32_t> stops = params.stop_ids;
  if (!params.ignore_eos) stops.insert(stops.end(), model.config().eos_token_ids.begin(), model.config().eos_token_ids.end());
  auto is_stop = [&](int32_t t) { return std::find(stops.begin(), stops.end(), t) != stops.end(); };

  Sampler sampler(params.sampling);
  RecentTokens recent(params.sampling.penalty_window);
  if (params.sampling.has_penalties())
    for (int32_t t : prompt) recent.push(t);

  // Tokens picked where the logits are (a GPU: only ids cross to the host) when the model can and
  // the request needs nothing the device pick lacks: penalties and the raw rows (on_logits, for
  // logprobs) sample on the host. Both follow the same seeded stream, so a seed gives one output.
  // Top-k also samples on the host for now: the device sampler's top-k search (one block per row)
  // costs more than the row copy plus the host's partial sort (H200, vocab 248320: 2.5 ms against
  // 1.25 ms with top_p; vocab 4096: about 40 us slower per token), while greedy, temperature,
  // top-p and min-p are faster on the device.
  const SamplingParams& sp = params.sampling;
  const bool device_sampler_pays = sp.greedy() || sp.top_k == 0 || sp.top_k >= model.vocab_size();
  const bool on_device = model.picks_on_device() && !params.on_logits && !sp.has_penalties() && device_sampler_pays;
  TokenPick pick;
  pick.greedy = sp.greedy();
  pick.sampling = {sp.temperature, sp.top_p, sp.top_k, sp.min_p};
  double uniform = 0.0;
  // The token after the last of `fed`, picked on the device.
  auto forward_pick_last = [&](std::span<const int32_t> fed) {
    if (!pick.greedy) {
      uniform = sampler.uniform();
      pick.uniforms = {&uniform, 1};
    }
    return model.forward_pick(fed, state, LogitsFor::last, pick)[0];
  };

  auto t0 = std::chrono::steady_clock::now();
  Tensor logits;
  int32_t first_token = -1;  // picked on the device with the last prompt chunk
  const size_t chunk = static_cast<size_t>(std::max(1, params.prefill_chunk > 0 ? params.prefill_chunk : model.prefill_chunk()));
  const int64_t start = state.length();
  for (size_t begin = 0; begin < prompt.size();) {
    size_t end = std::min(prompt.size(), begin + chunk);
    for (int64_t p : params.snapshot_at) {  // split the forward at snapshot positions
      const int64_t rel = p - start;
      if (rel > static_cast<int64_t>(begin) && rel < static_cast<int64_t>(end)) end = static_cast<size_t>(rel);
    }
    const auto piece = prompt.subspan(begin, end - begin);
    if (end == prompt.size() && on_device) first_token = forward_pick_last(piece);
    else logits = model.forward(piece, state, end == prompt.size() ? LogitsFor::last : LogitsFor::none);
    if (params.on_snapshot && std::find(params.snapshot_at.begin(), params.snapshot_at.end(), state.length()) != params.snapshot_at.end())
      params.on_snapshot(state);
    begin = end;
  }

  std::vector<int32_t> pending;  // tokens not yet handed to the callback
  const size_t every = static_cast<size_t>(std::max(1, params.callback_every));
  auto flush = [&]() {
    if (pending.empty() || !on_tokens) {
      pending.clear();
      return true;
    }
    bool go_on = on_tokens(pending);
    pending.clear();
    return go_on;
  };
  // Records a sampled token; false when generation must end (stop token, cancel, max_tokens).
  auto emit = [&](int32_t token) {
    result.tokens.push_back(token);
    pending.push_back(token);
    if (params.sampling.has_penalties()) recent.push(token);
    if (is_stop(token)) {
      result.finish = FinishReason::stop;
      return false;
    }
    if (pending.size() >= every && !flush()) {
      result.finish = FinishReason::cancelled;
      return false;
    }
    return static_cast<int>(result.tokens.size()) < params.max_tokens;
  };
  auto row_of = [&](const Tensor& rows, int64_t r) {
    std::span<float> row(rows.data<float>() + r * rows.stride(0), static_cast<size_t>(vocab));
    if (params.on_logits) params.on_logits(row);
    return row;
  };

  std::vector<int32_t> context;  // prompt + generated: what prompt lookup searches
  if (params.speculate) context.assign(prompt.begin(), prompt.end());
  spec::SpeculationStats local_stats;
  spec::DraftGate gate(params.speculation_stats ? *params.speculation_stats : local_stats, params.speculate ? params.lookup.max_draft : 0,
                       params.lookup.always);
  // Hybrid models: tokens of a partly rejected verification that the rewound state has not taken
  // back yet. They ride in front of the next forward rather than in a forward of their own: a
  // recurrent state cannot be truncated, and a few more rows cost less than another weight pass.
  std::vector<int32_t> replay;
  SequenceState::Checkpoint before;  // its buffers are reused by every verification

  int32_t token = on_device ? first_token : sampler.sample(row_of(logits, 0), recent);
  result.prefill_seconds = seconds_since(t0);
  const auto t_decode = std::chrono::steady_clock::now();
  bool go_on = emit(token);
  // Plain steps on a model that feeds its own picks back (a GPU): each step is queued before the host
  // reads the token of the one before, so the GPU does not wait for the host in between. The run
  // lasts as long as the draft gate keeps plain steps (speculation off: to the end), never queues a
  // step past max_tokens, and drops the step queued behind a stop token or a cancel unread (the
  // state keeps the token it fed). Returns whether generation goes on.
  auto chained_run = [&](int steps) {
    auto queue = [&](int32_t fed) {
      if (!pick.greedy) {
        uniform = sampler.uniform();
        pick.uniforms = {&uniform, 1};
      }
      model.queue_pick(fed, state, pick);
    };
    auto since = std::chrono::steady_clock::now();
    queue(token);
    for (int queued = 1, left = steps - 1; queued > 0;) {
      if (left > 0 && static_cast<int>(result.tokens.size()) + queued < params.max_tokens) {
        queue(Model::kPickedToken);
        ++queued;
        --left;
      }
      token = model.next_pick();
      --queued;
      if (params.speculate) {
        gate.on_plain_step(seconds_since(since));
        since = std::chrono::steady_clock::now();
        if (queued > 0) context.push_back(token);  // already fed to the step queued behind it
      }
      if (!emit(token)) {
        model.drop_picks();
        return false;
      }
    }
    return true;
  };
  const bool chains = on_device && model.chains_picks();
  while (go_on) {
    std::vector<int32_t> draft;
    if (params.speculate) {
      context.push_back(token);
      const int budget = params.max_tokens - static_cast<int>(result.tokens.size()) - 1;  // the bonus token needs one
      const int room = spec::kMaxRows - 1 - static_cast<int>(replay.size());              // rows whose cost is learned
      if (const int d = std::min(gate.draft_length(), room); d > 0) {
        spec::PromptLookupParams lookup = params.lookup;
        lookup.max_draft = d;
        draft = spec::propose(context, lookup, budget);
      }
    }
    std::vector<int32_t> fed = std::move(replay);
    replay.clear();
    const size_t first = fed.size();  // the row of `token`
    fed.push_back(token);
    const auto step_start = std::chrono::steady_clock::now();
    if (draft.empty() && chains && fed.size() == 1) {
      go_on = chained_run(params.speculate ? gate.plain_run() : params.max_tokens);
      continue;
    }
    if (draft.empty()) {
      token = on_device ? forward_pick_last(fed) : sampler.sample(row_of(model.forward(fed, state, LogitsFor::last), 0), recent);
      if (params.speculate) {
        if (fed.size() == 1) gate.on_plain_step(seconds_since(step_start));
        else gate.on_replay_step(static_cast<int>(fed.size()), seconds_since(step_start));
      }
      go_on = emit(token);
      continue;
    }

    // Verify: one forward over [replay.., token, d1..dk]; the row of d_j predicts what follows it.
    const int64_t base = state.length();
    const bool recurrent = state.has_recurrent_state();
    if (recurrent) state.checkpoint(before);
    fed.insert(fed.end(), draft.begin(), draft.end());
    std::vector<int32_t> out;  // accepted drafts, then the first token picked on a mismatch (or the bonus)
    size_t accepted = 0;
    // Each row picks the token a plain step would pick there (argmax, or the seeded stream's next
    // uniform), and its draft is accepted when the two agree: with sampling that happens with
    // probability p(draft), so the output is exactly a sample from p, and it is the same output with
    // or without drafts (which steps draft depends on timing). One uniform per token kept.
    auto keep = [&](int32_t next, size_t j) {
      out.push_back(next);
      if (j == draft.size() || next != draft[j]) return false;
      ++accepted;
      return !is_stop(next);
    };
    if (on_device && (pick.greedy || fed.size() <= static_cast<size_t>(ops::kMaxSampleRows))) {
      // On the device: every row's pick in one small copy of ids.
      std::vector<double> ahead;
      if (!pick.greedy) {
        ahead.assign(first, 0.0);  // rows of replayed tokens: picked, not read
        const std::vector<double> u = sampler.uniforms_ahead(draft.size() + 1);
        ahead.insert(ahead.end(), u.begin(), u.end());
      }
      pick.uniforms = ahead;
      const std::span<const int32_t> ids = model.forward_pick(fed, state, LogitsFor::all, pick);
      for (size_t j = 0; j <= draft.size() && keep(ids[first + j], j); ++j) {
      }
      if (!pick.greedy) sampler.skip_uniforms(out.size());
      pick.uniforms = {};
    } else {
      // Penalties, logits hooks or top-k: on the host. Later rows see the accepted drafts as history.
      Tensor rows = model.forward(fed, state, LogitsFor::all);
      RecentTokens trial = recent;
      for (size_t j = 0; j <= draft.size(); ++j) {
        const int32_t next = sampler.sample(row_of(rows, static_cast<int64_t>(first + j)), trial);
        if (!keep(next, j)) break;
        if (params.sampling.has_penalties()) trial.push(next);
      }
    }
    result.drafted_tokens += static_cast<int64_t>(draft.size());
    result.accepted_tokens += static_cast<int64_t>(accepted);

    // Keep exactly fed[0 .. first + 1 + accepted) in the state. Attention-only state drops the
    // rejected rows; a recurrent one is rewound and the kept tokens become the next replay.
    const size_t kept = first + 1 + accepted;
    if (base + static_cast<int64_t>(kept) < state.length()) {
      if (recurrent) {
        state.rewind(before);
        replay.assign(fed.begin(), fed.begin() + static_cast<std::ptrdiff_t>(kept));
      } else {
        state.truncate(base + static_cast<int64_t>(kept));
      }
    }
    gate.on_verified(static_cast<int>(fed.size()), static_cast<int>(draft.size()), static_cast<int>(accepted), seconds_since(step_start));
    for (size_t j = 0; j < out.size() && go_on; ++j) {
      token = out[j];
      if (j + 1 < out.size()) context.push_back(token);  // the last one is pushed when it is fed
      go_on = emit(token);
    }
  }
  if (result.finish != FinishReason::cancelled) flush();  // generation already ended: its reason stands
  result.decode_seconds = seconds_since(t_decode);
  return result;
}

}  // namespace sanctum
