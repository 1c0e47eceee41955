#include "engine/output_constraint.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "ops/ref/sampling.h"

namespace sanctum {

namespace {

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

bool ConstraintState::masked_now() const {
  return constraint_ && (phase_ == Phase::grammar || (phase_ == Phase::first && after_reasoning() == Phase::grammar));
}

bool ConstraintState::current_mask() {
  if (!masked_now()) return false;
  matcher_->fill_mask(mask_);
  if (phase_ == Phase::first) allow(mask_, constraint_->open_reasoning);
  // Ids past the grammar's vocabulary (none where it was built at the model's size) never fit it.
  const size_t tokens = constraint_->grammar->vocab().size();
  if (tokens % 32 != 0 && !mask_.empty()) mask_.back() &= (uint32_t{1} << (tokens % 32)) - 1;
  return true;
}

void ConstraintState::apply(std::span<float> row) {
  if (!constraint_) return;
  for (const auto& [token, bias] : constraint_->logit_bias)
    if (token >= 0 && static_cast<size_t>(token) < row.size()) row[static_cast<size_t>(token)] += bias;
  if (current_mask()) ops::ref::mask_row(row, mask_);
}

bool ConstraintState::fill_mask(std::span<uint32_t> words) {
  if (!current_mask()) return false;
  const size_t n = std::min(words.size(), mask_.size());
  std::copy(mask_.begin(), mask_.begin() + static_cast<std::ptrdiff_t>(n), words.begin());
  std::fill(words.begin() + static_cast<std::ptrdiff_t>(n), words.end(), 0u);
  return true;
}

bool ConstraintState::fill_masks(std::span<const int32_t> draft, std::span<uint32_t> words, size_t row_words) {
  check(words.size() == (draft.size() + 1) * row_words, ErrorKind::internal, "fill_masks: one row of words per draft token and one more");
  const Phase phase = phase_;
  const size_t history = matcher_ ? matcher_->history_size() : 0;
  bool any = false;
  size_t j = 0;
  for (; j <= draft.size(); ++j) {
    const std::span<uint32_t> row = words.subspan(j * row_words, row_words);
    if (fill_mask(row)) any = true;
    else std::fill(row.begin(), row.end(), ~0u);
    if (j == draft.size() || complete() || !allows(draft[j])) break;
  }
  std::fill(words.begin() + static_cast<std::ptrdiff_t>(std::min(j + 1, draft.size() + 1) * row_words), words.end(), ~0u);
  phase_ = phase;
  if (matcher_) matcher_->rollback(matcher_->history_size() - history);
  return any;
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
