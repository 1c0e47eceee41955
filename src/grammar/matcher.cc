#include "grammar/matcher.h"

#include <algorithm>

#include "grammar/token_walk.h"

namespace sanctum::grammar {

GrammarMatcher::GrammarMatcher(CompiledGrammar compiled) : compiled_(std::move(compiled)), machine_(compiled_.grammar()) {
  StepFlags flags;
  machine_.start_root(tops_, flags);
  history_.push_back(Step{machine_.arena_size(), 0, tops_.size(), flags.accept, false});
}

bool GrammarMatcher::is_complete() const {
  const Step& s = history_.back();
  return s.terminated || (s.accept && s.tops_end == s.tops_begin);
}

void GrammarMatcher::fill_mask(std::span<uint32_t> bitmask) {
  const Vocabulary& vocab = compiled_.vocab();
  SANCTUM_CHECK(bitmask.size() >= vocab.mask_words(), ErrorKind::invalid_argument,
                "grammar: the token bitmask has " + std::to_string(bitmask.size()) + " words; the vocabulary needs " +
                    std::to_string(vocab.mask_words()));
  if (is_terminated()) {
    std::fill(bitmask.begin(), bitmask.end(), 0u);
    return;
  }
  std::fill(bitmask.begin() + static_cast<std::ptrdiff_t>(vocab.mask_words()), bitmask.end(), 0u);
  const auto mask = bitmask.first(vocab.mask_words());
  StateMaskCache& cache = compiled_.state_masks();
  const bool keyed = cache.budget_bytes() > 0 && state_key();
  if (keyed && cache.find(key_, mask, vocab)) return;
  combine_mask(mask);
  if (keyed) cache.insert(key_, mask, vocab);
}

bool GrammarMatcher::state_key() {
  // Each top's stack, top first; then sorted and deduplicated, since the mask depends only on the
  // set of stacks (arena ids and their order differ between matchers that reach the same state).
  stacks_.clear();
  segments_.clear();
  for (uint32_t t : tops()) {
    const auto begin = static_cast<uint32_t>(stacks_.size());
    for (uint32_t id = t; id != kRootParent; id = machine_.node(id).parent) {
      stacks_.push_back(machine_.node(id).pos);
      if (stacks_.size() + segments_.size() >= StateMaskCache::kMaxKeyWords) return false;
    }
    segments_.push_back({begin, static_cast<uint32_t>(stacks_.size())});
  }
  auto view = [&](const std::pair<uint32_t, uint32_t>& s) {
    return std::span<const uint32_t>(stacks_.data() + s.first, s.second - s.first);
  };
  if (segments_.size() > 1) {
    std::sort(segments_.begin(), segments_.end(), [&](const auto& a, const auto& b) {
      const auto x = view(a), y = view(b);
      return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end());
    });
    segments_.erase(std::unique(segments_.begin(), segments_.end(),
                                [&](const auto& a, const auto& b) {
                                  const auto x = view(a), y = view(b);
                                  return std::equal(x.begin(), x.end(), y.begin(), y.end());
                                }),
                    segments_.end());
  }
  key_.assign(1, can_end() ? 1u : 0u);
  for (const auto& s : segments_) {
    const auto v = view(s);
    key_.insert(key_.end(), v.begin(), v.end());
    key_.push_back(kRootParent);  // positions stay below 2^31: the separator is unambiguous
  }
  return true;
}

void GrammarMatcher::combine_mask(std::span<uint32_t> bitmask) {
  const Vocabulary& vocab = compiled_.vocab();
  std::fill(bitmask.begin(), bitmask.end(), 0u);
  const auto current = tops();
  uncertain_.clear();
  held_.clear();
  for (uint32_t t : current) {
    const PositionMask& m = apply_context_masks(t, bitmask);
    uncertain_.insert(uncertain_.end(), m.uncertain.begin(), m.uncertain.end());
  }
  held_.clear();  // the masks' own references: eviction may free them now
  if (current.size() > 1) {
    std::sort(uncertain_.begin(), uncertain_.end());
    uncertain_.erase(std::unique(uncertain_.begin(), uncertain_.end()), uncertain_.end());
  }
  // Tokens another top already accepts need no walk.
  std::erase_if(uncertain_, [&](uint32_t index) {
    const int32_t id = vocab.sorted()[index];
    return (bitmask[static_cast<size_t>(id) / 32] >> (id % 32)) & 1;
  });
  if (!uncertain_.empty())
    walk_tokens(machine_, vocab, current, uncertain_, false, [&](uint32_t index, TokenClass c) {
      if (c != TokenClass::accepted) return;
      const int32_t id = vocab.sorted()[index];
      bitmask[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
    });
  if (can_end())
    for (int32_t id : vocab.eos_ids()) bitmask[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
}

const PositionMask& GrammarMatcher::apply_context_masks(uint32_t top, std::span<uint32_t> bitmask) {
  // Deepen the context while many tokens still depend on what lies below it; each level adds the
  // tokens it settled.
  constexpr size_t kRefineAbove = 4;
  constexpr size_t kMaxDepth = 16;
  context_.assign(1, machine_.node(top).pos);
  uint32_t below = machine_.node(top).parent;
  const PositionMask* base = nullptr;
  size_t counted_at = 0;
  for (;;) {
    const bool at_root = below == kRootParent;
    context_.push_back(at_root ? kContextRoot : kContextOpen);
    std::shared_ptr<const PositionMask> held = compiled_.mask_for(context_, base, counted_at);
    const PositionMask& m = *held;
    // Tops often share contexts (alternatives after a value): apply each mask once per fill.
    if (std::find(held_.begin(), held_.end(), held) == held_.end()) {
      m.apply(bitmask, compiled_.vocab());
      held_.push_back(std::move(held));
    }
    if (at_root || m.uncertain.size() <= kRefineAbove || context_.size() > kMaxDepth) return m;
    base = &m;
    context_.back() = machine_.node(below).pos;
    below = machine_.node(below).parent;
    // A counted repeat's return comes with its follower: the level is then one mask per count
    // drawn from a profile shared by every count (CompiledGrammar::mask_for).
    counted_at = 0;
    if (below != kRootParent && compiled_.grammar().counted_return(context_.back())) {
      counted_at = context_.size() - 1;
      context_.push_back(machine_.node(below).pos);
      below = machine_.node(below).parent;
    }
  }
}

bool GrammarMatcher::accept_bytes(std::string_view text) {
  if (is_terminated()) return false;
  const size_t mark = machine_.arena_size();
  scratch_.assign(tops().begin(), tops().end());
  StepFlags flags{history_.back().accept, false};
  for (size_t i = 0; i < text.size(); ++i) {
    next_.clear();
    flags = StepFlags{};
    machine_.advance(scratch_, static_cast<uint8_t>(text[i]), next_, flags);
    // Dead, or the grammar ended before the text did.
    if (next_.empty() && (!flags.accept || i + 1 < text.size())) {
      machine_.truncate(mark);
      return false;
    }
    scratch_.swap(next_);
  }
  const size_t begin = tops_.size();
  tops_.insert(tops_.end(), scratch_.begin(), scratch_.end());
  history_.push_back(Step{machine_.arena_size(), begin, tops_.size(), flags.accept, false});
  return true;
}

bool GrammarMatcher::accept(int32_t token) {
  const Vocabulary& vocab = compiled_.vocab();
  if (token < 0 || static_cast<size_t>(token) >= vocab.size() || is_terminated()) return false;
  if (vocab.is_eos(token)) {
    if (!can_end()) return false;
    history_.push_back(Step{machine_.arena_size(), tops_.size(), tops_.size(), true, true});
    return true;
  }
  const std::string& bytes = vocab.bytes(token);
  if (bytes.empty()) return false;  // special tokens never appear inside the grammar
  return accept_bytes(bytes);
}

void GrammarMatcher::rollback(size_t n) {
  SANCTUM_CHECK(n <= history_size(), ErrorKind::invalid_argument,
                "grammar: cannot roll back " + std::to_string(n) + " tokens; only " + std::to_string(history_size()) + " were accepted");
  history_.resize(history_.size() - n);
  const Step& s = history_.back();
  tops_.resize(s.tops_end);
  machine_.truncate(s.arena_mark);
}

}  // namespace sanctum::grammar
