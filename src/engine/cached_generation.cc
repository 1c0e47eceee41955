#include "engine/cached_generation.h"

#include <algorithm>
#include <vector>

namespace sanctum {

TailSnapshot::TailSnapshot(std::vector<int32_t> tokens, const std::shared_ptr<const SequenceState>& base)
    : tokens_(std::move(tokens)), base_(base), base_length_(base ? base->length() : 0), base_empty_(base == nullptr) {}

bool TailSnapshot::step(Model& model, PrefixCache& cache) {
  if (done_) return true;
  const std::span<const int32_t> tokens(tokens_);
  if (!working_) {  // starting, or resuming after pause()
    const auto base = base_.lock();
    if ((!base && !base_empty_) || cache.holds_extension(tokens)) {
      done_ = true;
      return true;
    }
    working_ = std::make_unique<SequenceState>(base ? SequenceState() : model.new_state());
    if (base) working_->restore(*base);
  }
  // Forwards end on multiples of kAlign, as the chunked prefill of a prompt from scratch does (CPU
  // prompt pieces end on multiples of 128, themselves aligned), so the state comes out bit for bit.
  const int64_t pos = working_->length();
  const int64_t end = std::min(target(), (pos / PrefixCache::kAlign + 1) * PrefixCache::kAlign);
  model.forward(tokens.subspan(static_cast<size_t>(pos), static_cast<size_t>(end - pos)), *working_, LogitsFor::none);
  ++forwards_;
  prefilled_ += end - pos;
  if (end < target()) return false;
  stored_ = cache.store(tokens, *working_) != nullptr;
  if (stored_)
    for (int64_t len : stepping_stones_) cache.erase(tokens.first(static_cast<size_t>(len)));
  working_.reset();
  done_ = true;
  return true;
}

void TailSnapshot::pause(PrefixCache& cache) {
  if (!working_ || done_) return;
  const int64_t len = working_->length();
  if (len > base_length_) {
    base_ = cache.store(std::span<const int32_t>(tokens_).first(static_cast<size_t>(len)), *working_);
    base_length_ = len;
    base_empty_ = false;
    stepping_stones_.push_back(len);
  }
  working_.reset();
}

bool TailSnapshot::finish(Model& model, PrefixCache& cache) {
  while (!step(model, cache)) {
  }
  return stored_;
}

PromptCacheUse::PromptCacheUse(Model& model, PrefixCache* cache, std::span<const int32_t> prompt, SequenceState& state,
                               GenerationParams& params, const PrefixCache::Hit* found)
    : cache_(cache), prompt_(prompt.begin(), prompt.end()) {
  if (!cache_) {
    state = model.new_state();
    return;
  }
  const PrefixCache::Hit hit = found != nullptr ? *found : cache_->find(prompt);
  reused_ = cache_->acquire(model, prompt, state, &base_, &hit);
  restored_from_ = hit.entry;
  base_known_ = true;
  params.snapshot_at = PrefixCache::snapshot_points(state, static_cast<int64_t>(prompt.size()));
  params.on_snapshot = [this](const SequenceState& s) {
    base_ = cache_->store(prompt_, s);
    base_known_ = base_ != nullptr;  // not kept (the pool is too small): nothing to start from
  };
}

void PromptCacheUse::finish(const GenerationResult& result, SequenceState& state, std::unique_ptr<TailSnapshot>* tail) {
  if (tail) tail->reset();
  if (!cache_) return;
  std::vector<int32_t> sequence = prompt_;
  sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
  if (!state.has_recurrent_state()) {
    cache_->store(sequence, state);
  } else if (tail && base_known_ && result.finish != FinishReason::cancelled) {
    const int64_t target = PrefixCache::aligned_point(static_cast<int64_t>(sequence.size()));
    const int64_t from = base_ ? base_->length() : 0;
    // The tail is rebuilt by a text prefill: not when an image lies past the base.
    if (target > from && std::none_of(sequence.begin() + from, sequence.begin() + target, PrefixCache::is_image_key)) {
      sequence.resize(static_cast<size_t>(target));
      *tail = std::make_unique<TailSnapshot>(std::move(sequence), base_);
    }
  }
}

GenerationResult generate_with_cache(Model& model, PrefixCache* cache, std::span<const int32_t> prompt, GenerationParams params,
                                     const TokenCallback& on_tokens, int64_t* reused_tokens, std::unique_ptr<TailSnapshot>* tail) {
  SequenceState state;
  PromptCacheUse use(model, cache, prompt, state, params);
  if (reused_tokens) *reused_tokens = use.reused();
  GenerationResult result = generate(model, state, prompt.subspan(static_cast<size_t>(use.reused())), params, on_tokens);
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  use.finish(result, state, tail);
  return result;
}

}  // namespace sanctum
