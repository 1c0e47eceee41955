#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <mutex>
#include <numeric>

#include "grammar/stack_machine.h"
#include "grammar/token_walk.h"

namespace sanctum::grammar {

void PositionMask::apply(std::span<uint32_t> mask, const Vocabulary& vocab) const {
  switch (form) {
    case Form::accepted_ids:
      for (int32_t id : ids) mask[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
      return;
    case Form::bitset:
      for (size_t i = 0; i < bits.size(); ++i) mask[i] |= bits[i];
      return;
    case Form::all_but_ids: {
      const auto& all = vocab.ordinary_mask();
      // ids are few here; clear them from a copy of "all" word by word as we go.
      size_t k = 0;
      for (size_t w = 0; w < all.size(); ++w) {
        uint32_t word = all[w];
        while (k < ids.size() && static_cast<size_t>(ids[k]) / 32 == w) word &= ~(uint32_t{1} << (ids[k++] % 32));
        mask[w] |= word;
      }
      return;
    }
  }
}

size_t PositionMask::memory_bytes() const {
  return ids.size() * sizeof(int32_t) + bits.size() * sizeof(uint32_t) + uncertain.size() * sizeof(uint32_t);
}

PositionMask compute_context_mask(const Grammar& grammar, const Vocabulary& vocab, std::span<const uint32_t> context,
                                  const PositionMask* base) {
  StackMachine machine(grammar);
  // The known parents, bottom first, over the context's end.
  uint32_t parent = context.back() == kContextRoot ? kRootParent : kOpenParent;
  for (size_t i = context.size() - 1; i-- > 1;) parent = machine.push_node(context[i], parent);
  std::vector<uint32_t> tops;
  StepFlags flags;
  machine.start_at(context[0], parent, tops, flags);
  std::vector<int32_t> accepted;
  PositionMask m;
  // A refinement only revisits what its shallower context left uncertain.
  std::span<const uint32_t> indices;
  if (base) indices = base->uncertain;
  walk_tokens(machine, vocab, tops, indices, base == nullptr, [&](uint32_t index, TokenClass c) {
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

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab, size_t state_cache_bytes)
    : impl_(std::make_shared<Impl>()) {
  impl_->grammar = std::move(grammar);
  impl_->vocab = std::move(vocab);
  impl_->state_masks = std::make_unique<StateMaskCache>(state_cache_bytes);
  for (uint32_t pos = 0; pos < impl_->grammar->element_count(); ++pos)
    if (impl_->grammar->element(pos).kind == ElementKind::bytes) impl_->terminal_positions.push_back(pos);
}

const PositionMask& CompiledGrammar::mask_for(std::span<const uint32_t> context, const PositionMask* base) const {
  const std::string key(reinterpret_cast<const char*>(context.data()), context.size_bytes());
  {
    std::shared_lock lock(impl_->mutex);
    auto it = impl_->masks.find(key);
    if (it != impl_->masks.end()) return *it->second;
  }
  // Computed outside the lock; two threads racing on one context both compute, the first one stays.
  auto mask = std::make_unique<PositionMask>(compute_context_mask(*impl_->grammar, *impl_->vocab, context, base));
  std::unique_lock lock(impl_->mutex);
  auto [it, inserted] = impl_->masks.try_emplace(key, std::move(mask));
  return *it->second;
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
  std::shared_lock lock(impl_->mutex);
  for (const auto& [key, m] : impl_->masks) {
    ++s.masks_computed;
    s.mask_bytes += m->memory_bytes();
    s.uncertain_tokens += m->uncertain.size();
  }
  return s;
}

}  // namespace sanctum::grammar
