#include "grammar/compiled_grammar.h"

#include <algorithm>
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

PositionMask compute_position_mask(const Grammar& grammar, const Vocabulary& vocab, uint32_t pos) {
  StackMachine machine(grammar);
  std::vector<uint32_t> tops;
  StepFlags flags;
  machine.start_at(pos, kOpenParent, tops, flags);
  std::vector<uint32_t> all(vocab.sorted().size());
  std::iota(all.begin(), all.end(), 0u);
  std::vector<int32_t> accepted;
  PositionMask m;
  walk_tokens(machine, vocab, tops, all, [&](uint32_t index, TokenClass c) {
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

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab)
    : impl_(std::make_shared<Impl>()) {
  impl_->grammar = std::move(grammar);
  impl_->vocab = std::move(vocab);
  const size_t n = impl_->grammar->element_count();
  impl_->once = std::make_unique<std::once_flag[]>(n);
  impl_->masks.resize(n);
  for (uint32_t pos = 0; pos < n; ++pos)
    if (impl_->grammar->element(pos).kind == ElementKind::bytes) impl_->terminal_positions.push_back(pos);
}

const PositionMask& CompiledGrammar::mask_at(uint32_t pos) const {
  std::call_once(impl_->once[pos], [&] {
    impl_->masks[pos] = std::make_unique<PositionMask>(compute_position_mask(*impl_->grammar, *impl_->vocab, pos));
  });
  return *impl_->masks[pos];
}

size_t CompiledGrammar::precompute_all() const {
  for (uint32_t pos : impl_->terminal_positions) mask_at(pos);
  return impl_->terminal_positions.size();
}

CompileStats CompiledGrammar::stats() const {
  CompileStats s;
  s.rules = impl_->grammar->rule_count();
  s.elements = impl_->grammar->element_count();
  s.terminals = impl_->terminal_positions.size();
  for (uint32_t pos : impl_->terminal_positions) {
    // Reading without call_once is safe only for masks already built; stats are for after a run.
    const PositionMask* m = impl_->masks[pos].get();
    if (!m) continue;
    ++s.masks_computed;
    s.mask_bytes += m->memory_bytes();
    s.uncertain_tokens += m->uncertain.size();
  }
  return s;
}

}  // namespace sanctum::grammar
