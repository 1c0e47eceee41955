#include "engine/sequence_run.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace sanctum {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

SequenceRun::SequenceRun(const Model& model, GenerationParams params, TokenCallback on_tokens)
    : model_(&model), params_(std::move(params)), on_tokens_(std::move(on_tokens)), sampler_(params_.sampling),
      recent_(params_.sampling.penalty_window), constraint_(params_.constraint), local_stats_(std::make_unique<spec::SpeculationStats>()),
      gate_(params_.speculation_stats ? *params_.speculation_stats : *local_stats_, params_.speculate ? params_.lookup.max_draft : 0,
            params_.lookup.always) {
  check(params_.max_tokens >= 0, ErrorKind::invalid_argument, "generate: max_tokens must be >= 0");
  stops_ = params_.stop_ids;
  if (!params_.ignore_eos) stops_.insert(stops_.end(), model.config().eos_token_ids.begin(), model.config().eos_token_ids.end());
  chunk_ = static_cast<size_t>(std::max(1, params_.prefill_chunk > 0 ? params_.prefill_chunk : model.prefill_chunk()));
}

SequenceRun::SequenceRun(const Model& model, SequenceState state, std::vector<int32_t> prompt, GenerationParams params,
                         TokenCallback on_tokens)
    : SequenceRun(model, std::move(params), std::move(on_tokens)) {
  check(!prompt.empty(), ErrorKind::invalid_argument, "generate: the prompt is empty");
  const int64_t vocab = model.vocab_size();
  for (int32_t id : prompt)
    check(id >= 0 && id < vocab, ErrorKind::invalid_argument,
          "prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  state_ = std::move(state);
  prompt_ = std::move(prompt);
  start_length_ = state_.length();
  result_.prompt_tokens = static_cast<int64_t>(prompt_.size());
  if (params_.sampling.has_penalties())
    for (int32_t t : prompt_) recent_.push(t);
  if (params_.speculate) context_ = prompt_;
  if (params_.max_tokens == 0) done_ = true;
}

SequenceRun SequenceRun::fork(GenerationParams params, TokenCallback on_tokens) const {
  check(prompt_row_ready(), ErrorKind::internal, "SequenceRun::fork: the prompt's logits row was not kept");
  SequenceRun run(*model_, std::move(params), std::move(on_tokens));
  run.state_.restore(*state_.snapshot());
  run.prompt_ = prompt_;
  run.fed_prompt_ = run.planned_prompt_ = prompt_.size();
  run.start_length_ = start_length_;
  run.result_.prompt_tokens = result_.prompt_tokens;
  if (run.params_.sampling.has_penalties())
    for (int32_t t : prompt_) run.recent_.push(t);
  if (run.params_.speculate) run.context_ = prompt_;
  if (run.params_.max_tokens == 0) {
    run.done_ = true;
    return run;
  }
  run.started_ = true;
  run.t0_ = std::chrono::steady_clock::now();
  std::vector<float> row = prompt_row_;
  if (run.params_.on_logits) run.params_.on_logits(row);
  run.first_token(run.pick(row, run.recent_));
  return run;
}

SequenceRun::Step SequenceRun::plan(int64_t prompt_budget) {
  if (done_) return {};
  if (!started_) {
    started_ = true;
    t0_ = std::chrono::steady_clock::now();
  }
  if (prefilling()) {
    if (prompt_budget <= 0) return {};
    const size_t begin = fed_prompt_;
    size_t end = std::min(prompt_.size(), begin + std::min(chunk_, static_cast<size_t>(prompt_budget)));
    for (int64_t p : params_.snapshot_at) {  // split the forward at snapshot positions
      const int64_t rel = p - start_length_;
      if (rel > static_cast<int64_t>(begin) && rel < static_cast<int64_t>(end)) end = static_cast<size_t>(rel);
    }
    planned_prompt_ = end;
    return {std::span<const int32_t>(prompt_).subspan(begin, end - begin), end == prompt_.size() ? LogitsFor::last : LogitsFor::none};
  }

  draft_.clear();
  if (params_.speculate) {
    context_.push_back(token_);
    const int budget = params_.max_tokens - static_cast<int>(result_.tokens.size()) - 1;  // the bonus token needs one
    const int room = spec::kMaxRows - 1 - static_cast<int>(replay_.size());               // rows whose cost is learned
    if (const int d = std::min(gate_.draft_length(), room); d > 0) {
      spec::PromptLookupParams lookup = params_.lookup;
      lookup.max_draft = d;
      draft_ = spec::propose(context_, lookup, budget);
      // A draft token the grammar refuses would be rejected anyway: feed none from there on.
      draft_.resize(constraint_.allowed_prefix(draft_));
    }
  }
  fed_ = std::move(replay_);
  replay_.clear();
  first_ = fed_.size();
  fed_.push_back(token_);
  fed_.insert(fed_.end(), draft_.begin(), draft_.end());
  base_length_ = state_.length();
  if (!draft_.empty() && state_.has_recurrent_state()) state_.checkpoint(before_);
  return {fed_, draft_.empty() ? LogitsFor::last : LogitsFor::all};
}

void SequenceRun::take(const Tensor& rows, double seconds) {
  if (done_) return;  // cancelled while the step ran
  if (prefilling()) {
    prompt_piece_done();
    if (prefilling()) return;
    std::span<float> row = row_of(rows, 0);
    if (keep_prompt_row_) prompt_row_.assign(row.begin(), row.end());
    first_token(pick(row, recent_));
    return;
  }
  if (draft_.empty()) {
    token_ = pick(row_of(rows, 0), recent_);
    if (params_.speculate) {
      if (fed_.size() == 1) gate_.on_plain_step(seconds);
      else gate_.on_replay_step(static_cast<int>(fed_.size()), seconds);
    }
    if (!emit(token_)) end();
    return;
  }
  verify([&](size_t j, const RecentTokens& trial) { return pick(row_of(rows, static_cast<int64_t>(first_ + j)), trial); }, seconds);
}

// Verify: the rows of [replay.., token, d1..dk]; the row of d_j predicts what follows it. Each row
// picks (pick_row(j, history)) the token a plain step would pick there, and its draft is kept when the
// two agree: with sampling that happens with probability p(draft), so the output is exactly a sample
// from p, and the same with or without drafts. Later rows see the accepted drafts as history (and
// the grammar state after them: pick takes each picked token). Returns how many rows were picked.
template <class Pick>
size_t SequenceRun::verify(const Pick& pick_row, double seconds) {
  std::vector<int32_t> out;
  size_t accepted = 0;
  RecentTokens trial = recent_;
  for (size_t j = 0; j <= draft_.size(); ++j) {
    const int32_t next = pick_row(j, trial);
    out.push_back(next);
    if (j == draft_.size() || next != draft_[j]) break;
    ++accepted;
    if (std::find(stops_.begin(), stops_.end(), next) != stops_.end() || constraint_.complete()) break;
    if (params_.sampling.has_penalties()) trial.push(next);
  }
  after_verification(out, accepted, seconds);
  return out.size();
}

void SequenceRun::prompt_piece_done() {
  fed_prompt_ = planned_prompt_;
  if (params_.on_snapshot &&
      std::find(params_.snapshot_at.begin(), params_.snapshot_at.end(), state_.length()) != params_.snapshot_at.end())
    params_.on_snapshot(state_);
}

void SequenceRun::after_verification(const std::vector<int32_t>& out, size_t accepted, double seconds) {
  result_.drafted_tokens += static_cast<int64_t>(draft_.size());
  result_.accepted_tokens += static_cast<int64_t>(accepted);
  // Keep exactly fed[0 .. first + 1 + accepted) in the state. Attention-only state drops the rejected
  // rows; a recurrent one is rewound and the kept tokens become the next replay.
  const size_t kept = first_ + 1 + accepted;
  if (base_length_ + static_cast<int64_t>(kept) < state_.length()) {
    if (state_.has_recurrent_state()) {
      state_.rewind(before_);
      replay_.assign(fed_.begin(), fed_.begin() + static_cast<std::ptrdiff_t>(kept));
    } else {
      state_.truncate(base_length_ + static_cast<int64_t>(kept));
    }
  }
  gate_.on_verified(static_cast<int>(fed_.size()), static_cast<int>(draft_.size()), static_cast<int>(accepted), seconds);
  for (size_t j = 0; j < out.size(); ++j) {
    token_ = out[j];
    if (j + 1 < out.size()) context_.push_back(token_);  // the last one is pushed when it is fed
    if (!emit(token_, j + 1 == out.size())) return end();
  }
}

void SequenceRun::cancel() {
  if (done_) return;
  result_.finish = FinishReason::cancelled;
  done_ = true;
  if (started_ && !prefilling()) result_.decode_seconds = seconds_since(t_decode_);
}

void SequenceRun::first_token(int32_t token) {
  token_ = token;
  result_.prefill_seconds = seconds_since(t0_);
  t_decode_ = std::chrono::steady_clock::now();
  if (!emit(token)) end();
}

// Records a sampled token; false when generation must end (stop token, a complete grammar, cancel,
// max_tokens). `latest`: the constraint's state is the one after this token (a verification picks
// all its rows before emitting them; only its last can have completed the grammar).
bool SequenceRun::emit(int32_t token, bool latest) {
  result_.tokens.push_back(token);
  pending_.push_back(token);
  if (params_.sampling.has_penalties()) recent_.push(token);
  // A complete grammar allows nothing more: the output ends as at an end token.
  if (std::find(stops_.begin(), stops_.end(), token) != stops_.end() || (latest && constraint_.complete())) {
    result_.finish = FinishReason::stop;
    return false;
  }
  if (pending_.size() >= static_cast<size_t>(std::max(1, params_.callback_every)) && !flush()) {
    result_.finish = FinishReason::cancelled;
    return false;
  }
  return static_cast<int>(result_.tokens.size()) < params_.max_tokens;
}

bool SequenceRun::flush() {
  if (pending_.empty() || !on_tokens_) {
    pending_.clear();
    return true;
  }
  const bool go_on = on_tokens_(pending_);
  pending_.clear();
  return go_on;
}

void SequenceRun::end() {
  done_ = true;
  if (result_.finish != FinishReason::cancelled) flush();  // generation already ended: its reason stands
  result_.decode_seconds = seconds_since(t_decode_);
}

// The row's token: logit_bias and the grammar's mask first, then the sampler (penalties,
// temperature, filters); the constraint takes the token.
int32_t SequenceRun::pick(std::span<float> row, const RecentTokens& recent) {
  constraint_.apply(row);
  const int32_t token = sampler_.sample(row, recent);
  constraint_.accept(token);
  return token;
}

std::span<float> SequenceRun::row_of(const Tensor& rows, int64_t r) {
  std::span<float> row(rows.data<float>() + r * rows.stride(0), static_cast<size_t>(model_->vocab_size()));
  if (params_.on_logits) params_.on_logits(row);
  return row;
}

// Tokens picked where the logits are (a GPU: only ids cross to the host) when the model can and the
// request needs nothing the device pick lacks: penalties, logit_bias (a few biased ids, left on the
// host rather than carried into the pick) and the raw rows (on_logits, for logprobs, or a kept
// prompt row) sample on the host. Both follow the same seeded stream, so a seed gives one output. A
// grammar's mask goes with the pick (TokenPick::masks), worked out while the forward runs. Top-k
// also samples on the host for now: the device sampler's top-k search (one block per row) costs
// more than the row copy plus the host's partial sort (H200, vocab 248320: 2.5 ms against 1.25 ms
// with top_p; vocab 4096: about 40 us slower per token), while greedy, temperature, top-p and min-p
// are faster on the device.
bool SequenceRun::picks_on_device(const Model& model) const {
  const SamplingParams& sp = params_.sampling;
  const bool device_sampler_pays = sp.greedy() || sp.top_k == 0 || sp.top_k >= model.vocab_size();
  return model.picks_on_device() && !params_.on_logits && !sp.has_penalties() && device_sampler_pays && !keep_prompt_row_ &&
         !constraint_.biases();
}

// The grammar's masks of a device pick (TokenPick::masks), one row per logits row, each over the
// model's vocabulary: a plain step's one row under the state now, or a verification's rows (the
// replayed tokens' rows are not read: every id allowed) under the state after the drafts before each.
RowMasks SequenceRun::row_masks(bool verification) {
  const size_t words = static_cast<size_t>((model_->vocab_size() + 31) / 32);
  if (!verification) {
    mask_words_.resize(words);
    if (!constraint_.fill_mask(mask_words_)) return {};
  } else {
    mask_words_.assign(fed_.size() * words, ~0u);
    const std::span<uint32_t> after_replay = std::span<uint32_t>(mask_words_).subspan(first_ * words);
    if (!constraint_.fill_masks(draft_, after_replay, words)) return {};
  }
  return {mask_words_, static_cast<int64_t>(words)};
}

// The device pick of a step whose last `rows` rows are sampled (the rows before them, replayed
// tokens, are picked but not read): one uniform each from the seeded stream, taken later by
// skip_uniforms, or now for a plain step (rows 0).
TokenPick SequenceRun::pick_for(size_t rows) {
  const SamplingParams& sp = params_.sampling;
  TokenPick pick;
  pick.greedy = sp.greedy();
  pick.sampling = {sp.temperature, sp.top_p, sp.top_k, sp.min_p};
  if (constraint_.active()) pick.masks = [this, rows] { return row_masks(rows > 0); };
  if (pick.greedy) return pick;
  if (rows == 0) {
    uniform_ = sampler_.uniform();
    pick.uniforms = {&uniform_, 1};
    return pick;
  }
  ahead_.assign(first_, 0.0);
  const std::vector<double> u = sampler_.uniforms_ahead(rows);
  ahead_.insert(ahead_.end(), u.begin(), u.end());
  pick.uniforms = ahead_;
  return pick;
}

void SequenceRun::step_alone(Model& model) {
  if (done_) return;
  const bool on_device = picks_on_device(model);
  const bool was_prefilling = prefilling();
  const Step step = plan(std::numeric_limits<int64_t>::max());
  const auto start = std::chrono::steady_clock::now();
  if (was_prefilling) {
    if (step.which == LogitsFor::last && on_device) {
      const int32_t token = model.forward_pick(step.tokens, state_, LogitsFor::last, pick_for(0))[0];
      constraint_.accept(token);
      prompt_piece_done();
      first_token(token);
      return;
    }
    take(model.forward(step.tokens, state_, step.which), 0.0);
    return;
  }
  // A constrained step's mask needs the token before it, which a chained step is queued without.
  if (draft_.empty() && on_device && model.chains_picks() && fed_.size() == 1 && !constraint_.active())
    return chained_run(model, std::min(chain_limit_, params_.speculate ? gate_.plain_run() : params_.max_tokens));
  if (draft_.empty() && on_device) {
    token_ = model.forward_pick(fed_, state_, LogitsFor::last, pick_for(0))[0];
    constraint_.accept(token_);
    if (params_.speculate) {
      if (fed_.size() == 1) gate_.on_plain_step(seconds_since(start));
      else gate_.on_replay_step(static_cast<int>(fed_.size()), seconds_since(start));
    }
    if (!emit(token_)) end();
    return;
  }
  if (!draft_.empty() && on_device && (params_.sampling.greedy() || fed_.size() <= static_cast<size_t>(ops::kMaxSampleRows))) {
    // Every row's pick in one small copy of ids.
    const std::span<const int32_t> ids = model.forward_pick(fed_, state_, LogitsFor::all, pick_for(draft_.size() + 1));
    const size_t picked = verify(
        [&](size_t j, const RecentTokens&) {
          constraint_.accept(ids[first_ + j]);
          return ids[first_ + j];
        },
        seconds_since(start));
    if (!params_.sampling.greedy()) sampler_.skip_uniforms(picked);
    return;
  }
  Tensor rows = model.forward(fed_, state_, step.which);
  take(rows, seconds_since(start));
}

// Plain steps on a model that feeds its own picks back (a GPU): each step is queued before the host
// reads the token of the one before, so the GPU does not wait for the host in between. The run lasts
// as long as the draft gate keeps plain steps (speculation off: to the end), never queues a step past
// max_tokens, and drops the step queued behind a stop token or a cancel unread (the state keeps the
// token it fed).
void SequenceRun::chained_run(Model& model, int steps) {
  auto queue = [&](int32_t fed) { model.queue_pick(fed, state_, pick_for(0)); };
  auto since = std::chrono::steady_clock::now();
  queue(token_);
  for (int queued = 1, left = steps - 1; queued > 0;) {
    if (left > 0 && static_cast<int>(result_.tokens.size()) + queued < params_.max_tokens) {
      queue(Model::kPickedToken);
      ++queued;
      --left;
    }
    token_ = model.next_pick();
    --queued;
    if (params_.speculate) {
      gate_.on_plain_step(seconds_since(since));
      since = std::chrono::steady_clock::now();
      if (queued > 0) context_.push_back(token_);  // already fed to the step queued behind it
    }
    if (!emit(token_)) {
      model.drop_picks();
      return end();
    }
  }
}

}  // namespace sanctum
