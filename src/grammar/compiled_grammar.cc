#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <iterator>
#include <numeric>

#include "grammar/stack_machine.h"
#include "grammar/token_walk.h"

namespace sanctum::grammar {

void PositionMask::apply(std::span<uint32_t> mask, const Vocabulary& vocab) const {
  switch (form) {
    case Form::accepted_ids:
      for (int32_t id : ids) mask[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
      break;
    case Form::bitset:
      for (size_t i = 0; i < bits.size(); ++i) mask[i] |= bits[i];
      break;
    case Form::all_but_ids: {
      const auto& all = vocab.ordinary_mask();
      // ids are few here; clear them from a copy of "all" word by word as we go.
      size_t k = 0;
      for (size_t w = 0; w < all.size(); ++w) {
        uint32_t word = all[w];
        while (k < ids.size() && static_cast<size_t>(ids[k]) / 32 == w) word &= ~(uint32_t{1} << (ids[k++] % 32));
        mask[w] |= word;
      }
      break;
    }
  }
  if (profile)
    for (size_t i = 0; i < profile_count; ++i) {
      const int32_t id = profile->ids[i];
      mask[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
    }
}

size_t PositionMask::memory_bytes() const {
  return ids.size() * sizeof(int32_t) + bits.size() * sizeof(uint32_t) + uncertain.size() * sizeof(uint32_t);
}

PositionMask compute_context_mask(const Grammar& grammar, const Vocabulary& vocab, std::span<const uint32_t> context,
                                  const PositionMask* base) {
  // A refinement only revisits what its shallower context left uncertain.
  return walk_context_mask(grammar, vocab, context, base ? &base->uncertain : nullptr);
}

PositionMask walk_context_mask(const Grammar& grammar, const Vocabulary& vocab, std::span<const uint32_t> context,
                               const std::vector<uint32_t>* indices) {
  StackMachine machine(grammar);
  // The known parents, bottom first, over the context's end.
  uint32_t parent = context.back() == kContextRoot ? kRootParent : kOpenParent;
  for (size_t i = context.size() - 1; i-- > 1;) parent = machine.push_node(context[i], parent);
  std::vector<uint32_t> tops;
  StepFlags flags;
  machine.start_at(context[0], parent, tops, flags);
  std::vector<int32_t> accepted;
  PositionMask m;
  const std::span<const uint32_t> some = indices ? std::span<const uint32_t>(*indices) : std::span<const uint32_t>();
  walk_tokens(machine, vocab, tops, some, indices == nullptr, [&](uint32_t index, TokenClass c) {
    if (c == TokenClass::accepted) accepted.push_back(vocab.sorted()[index]);
    if (c == TokenClass::uncertain) m.uncertain.push_back(index);
  });
  std::sort(accepted.begin(), accepted.end());
  m.accepted_count = accepted.size();
  const size_t ordinary = vocab.sorted().size();
  const size_t words = vocab.mask_words();
  // Smallest of: the accepted ids, the ordinary ids not accepted, or a bitset.
  if (accepted.size() <= words && accepted.size() <= ordinary - accepted.size()) {
    m.form = PositionMask::Form::accepted_ids;
    m.ids = std::move(accepted);
  } else if (ordinary - accepted.size() <= words) {
    m.form = PositionMask::Form::all_but_ids;
    std::vector<uint32_t> bits(words, 0);
    for (int32_t id : accepted) bits[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
    for (int32_t id = 0; static_cast<size_t>(id) < vocab.size(); ++id)
      if (!vocab.bytes(id).empty() && !(bits[static_cast<size_t>(id) / 32] >> (id % 32) & 1)) m.ids.push_back(id);
  } else {
    m.form = PositionMask::Form::bitset;
    m.bits.assign(words, 0);
    for (int32_t id : accepted) m.bits[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
  }
  return m;
}

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab, MaskBudget budget)
    : impl_(std::make_shared<Impl>()) {
  impl_->grammar = std::move(grammar);
  impl_->vocab = std::move(vocab);
  const size_t state_bytes = std::min(budget.state_bytes, budget.bytes);
  impl_->masks = std::make_unique<MaskStore>(budget.bytes - state_bytes);
  impl_->state_masks = std::make_unique<StateMaskCache>(state_bytes);
  for (uint32_t pos = 0; pos < impl_->grammar->element_count(); ++pos)
    if (impl_->grammar->element(pos).kind == ElementKind::bytes) impl_->terminal_positions.push_back(pos);
  impl_->grammar_bytes = impl_->grammar->memory_bytes() + impl_->terminal_positions.capacity() * sizeof(uint32_t);
}

std::shared_ptr<const PositionMask> CompiledGrammar::mask_for(std::span<const uint32_t> context, const PositionMask* base,
                                                              size_t counted_at) const {
  const std::string_view key(reinterpret_cast<const char*>(context.data()), context.size_bytes());
  if (auto mask = impl_->masks->find_mask(key)) return mask;
  // Computed outside the lock; two threads racing on one context both compute, the first one stays.
  auto mask =
      std::make_shared<const PositionMask>(counted_at > 0 && base ? counted_mask(context, *base, counted_at)
                                                                  : compute_context_mask(*impl_->grammar, *impl_->vocab, context, base));
  return impl_->masks->add_mask(key, std::move(mask));
}

PositionMask CompiledGrammar::counted_mask(std::span<const uint32_t> context, const PositionMask& base, size_t counted_at) const {
  // Few tokens reach the repeat from here (a nested repeat below another): walking them is cheap.
  constexpr size_t kProfileAbove = 256;
  const Grammar& g = *impl_->grammar;
  const CountedReturn* counted = g.counted_return(context[counted_at]);
  SANCTUM_CHECK(counted && counted_at + 2 < context.size(), ErrorKind::internal, "grammar: a counted context without its follower");
  if (base.uncertain.size() < kProfileAbove) return compute_context_mask(g, *impl_->vocab, context, &base);
  std::shared_ptr<const RepeatProfile> profile = profile_for(context, base, counted_at);
  // Tokens that leave the repeat mid-token within the count, and those past the chain's counts.
  std::vector<uint32_t> walk;
  for (const RepeatProfile::Candidate& c : profile->candidates)
    if (c.exit_bodies <= counted->remaining && c.accept_bodies > counted->remaining) walk.push_back(c.index);
  if (counted->remaining > profile->length && !profile->overflow.empty()) {
    std::vector<uint32_t> merged;
    std::set_union(walk.begin(), walk.end(), profile->overflow.begin(), profile->overflow.end(), std::back_inserter(merged));
    walk = std::move(merged);
  }
  PositionMask m = walk_context_mask(g, *impl_->vocab, context, &walk);
  m.profile_count = profile->accepted(counted->remaining);
  m.accepted_count += m.profile_count;
  m.profile = std::move(profile);
  return m;
}

std::shared_ptr<const RepeatProfile> CompiledGrammar::profile_for(std::span<const uint32_t> context, const PositionMask& base,
                                                                  size_t counted_at) const {
  const Grammar& g = *impl_->grammar;
  // The bytes the follower can start with, or any when it can be passed without a byte.
  StackMachine machine(g);
  uint32_t parent = context.back() == kContextRoot ? kRootParent : kOpenParent;
  for (size_t i = context.size() - 1; i-- > counted_at + 2;) parent = machine.push_node(context[i], parent);
  std::vector<uint32_t> tops;
  StepFlags flags;
  machine.start_at(context[counted_at + 1], parent, tops, flags);
  ByteSet follow;
  for (uint32_t t : tops) {
    const ByteSet& set = g.byte_set(g.element(machine.node(t).pos).arg);
    for (size_t w = 0; w < follow.bits.size(); ++w) follow.bits[w] |= set.bits[w];
  }
  const uint32_t chain = g.counted_return(context[counted_at])->chain;
  // Keyed by the positions above the repeat, the chain and the follower's first bytes.
  std::string key(reinterpret_cast<const char*>(context.data()), counted_at * sizeof(uint32_t));
  key.append(reinterpret_cast<const char*>(&chain), sizeof chain);
  key.append(reinterpret_cast<const char*>(follow.bits.data()), sizeof follow.bits);
  key.push_back(flags.open_end ? 1 : 0);
  if (auto profile = impl_->masks->find_profile(key)) return profile;
  auto profile =
      std::make_shared<const RepeatProfile>(build_repeat_profile(g, *impl_->vocab, context.first(counted_at), g.canonical_chain(chain),
                                                                 flags.open_end ? nullptr : &follow, base.uncertain));
  return impl_->masks->add_profile(key, std::move(profile));
}

size_t CompiledGrammar::precompute_all() const {
  for (uint32_t pos : impl_->terminal_positions) {
    const uint32_t context[2] = {pos, kContextOpen};
    mask_for(context, nullptr);
  }
  return impl_->terminal_positions.size();
}

CompileStats CompiledGrammar::stats() const {
  CompileStats s;
  s.rules = impl_->grammar->rule_count();
  s.elements = impl_->grammar->element_count();
  s.terminals = impl_->terminal_positions.size();
  s.state_masks = impl_->state_masks->entries();
  s.state_mask_bytes = impl_->state_masks->bytes();
  s.state_hits = impl_->state_masks->hits();
  s.state_misses = impl_->state_masks->misses();
  const MaskStore::Stats m = impl_->masks->stats();
  s.masks_computed = m.masks;
  s.mask_bytes = m.mask_bytes;
  s.uncertain_tokens = m.uncertain_tokens;
  s.repeat_profiles = m.profiles;
  s.repeat_profile_bytes = m.profile_bytes;
  s.evicted = m.evicted;
  s.memory_bytes = memory_bytes();
  return s;
}

size_t CompiledGrammar::memory_bytes() const { return impl_->grammar_bytes + impl_->masks->bytes() + impl_->state_masks->bytes(); }

}  // namespace sanctum::grammar
