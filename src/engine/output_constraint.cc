#include "engine/output_constraint.h"

#include <algorithm>
#include <limits>
#include <string>

#include "base/error.h"

namespace sanctum {

namespace {

constexpr float kForbidden = -std::numeric_limits<float>::infinity();

// Sets the logits of tokens whose bit is clear to -inf. Masks are mostly empty words (a JSON state
// allows a few hundred of 150k+ tokens), so whole words are filled at once.
void mask_row(std::span<float> row, std::span<const uint32_t> mask, size_t mask_tokens) {
  const size_t n = std::min(row.size(), mask_tokens);
  for (size_t w = 0; w * 32 < n; ++w) {
    const uint32_t bits = mask[w];
    const size_t begin = w * 32, end = std::min(n, begin + 32);
    if (bits == ~0u) continue;
    if (bits == 0) {
      std::fill(row.begin() + static_cast<std::ptrdiff_t>(begin), row.begin() + static_cast<std::ptrdiff_t>(end), kForbidden);
      continue;
    }
    for (size_t i = begin; i < end; ++i)
      if (!((bits >> (i - begin)) & 1)) row[i] = kForbidden;
  }
  // Ids past the grammar's vocabulary (none where it was built at the model's size) never fit it.
  std::fill(row.begin() + static_cast<std::ptrdiff_t>(n), row.end(), kForbidden);
}

void allow(std::vector<uint32_t>& mask, int32_t token) {
  if (token >= 0 && static_cast<size_t>(token) / 32 < mask.size()) mask[static_cast<size_t>(token) / 32] |= uint32_t{1} << (token % 32);
}

}  // namespace

ConstraintState::ConstraintState(std::shared_ptr<const OutputConstraint> constraint) : constraint_(std::move(constraint)) {
  if (!constraint_) return;
  if (constraint_->grammar) {
    matcher_.emplace(*constraint_->grammar);
    mask_.assign(constraint_->grammar->vocab().mask_words(), 0);
  }
  if (constraint_->in_reasoning) phase_ = Phase::reasoning;
  else if (constraint_->open_reasoning >= 0) phase_ = Phase::first;
  else phase_ = after_reasoning();
}

ConstraintState::Phase ConstraintState::after_reasoning() const {
  if (!matcher_) return Phase::before_trigger;  // logit_bias alone: never masked
  return constraint_->trigger >= 0 ? Phase::before_trigger : Phase::grammar;
}

void ConstraintState::apply(std::span<float> row) {
  if (!constraint_) return;
  for (const auto& [token, bias] : constraint_->logit_bias)
    if (token >= 0 && static_cast<size_t>(token) < row.size()) row[static_cast<size_t>(token)] += bias;
  const bool masked = phase_ == Phase::grammar || (phase_ == Phase::first && after_reasoning() == Phase::grammar);
  if (!masked) return;
  matcher_->fill_mask(mask_);
  if (phase_ == Phase::first) allow(mask_, constraint_->open_reasoning);
  mask_row(row, mask_, constraint_->grammar->vocab().size());
}

bool ConstraintState::allows(int32_t token) {
  switch (phase_) {
    case Phase::first:
      if (token == constraint_->open_reasoning) {
        phase_ = Phase::reasoning;
        return true;
      }
      phase_ = after_reasoning();
      if (allows(token)) return true;
      phase_ = Phase::first;
      return false;
    case Phase::reasoning:
      if (token == constraint_->close_reasoning) phase_ = after_reasoning();
      return true;
    case Phase::before_trigger:
      if (matcher_ && token == constraint_->trigger) phase_ = Phase::grammar;
      return true;
    case Phase::grammar: return matcher_->accept(token);
  }
  return false;
}

void ConstraintState::accept(int32_t token) {
  if (!constraint_ || allows(token)) return;
  throw Error(ErrorKind::internal, "grammar: token " + std::to_string(token) +
                                       " does not continue the constrained output (no token of the vocabulary can; the grammar "
                                       "needs text this tokenizer cannot write)");
}

bool ConstraintState::complete() const { return phase_ == Phase::grammar && matcher_ && matcher_->is_complete(); }

size_t ConstraintState::allowed_prefix(std::span<const int32_t> draft) {
  if (!constraint_) return draft.size();
  const Phase phase = phase_;
  const size_t history = matcher_ ? matcher_->history_size() : 0;
  size_t n = 0;
  while (n < draft.size() && !complete() && allows(draft[n])) ++n;
  phase_ = phase;
  if (matcher_) matcher_->rollback(matcher_->history_size() - history);
  return n;
}

}  // namespace sanctum
