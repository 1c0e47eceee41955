#include "grammar/stack_machine.h"

#include <algorithm>

namespace sanctum::grammar {

namespace {
// Nesting of rule expansions that consume no byte; a grammar past it is too deep to match.
constexpr int kMaxExpandDepth = 4096;
// Expansions in one step. An ambiguous grammar keeps a stack per way of reading its input so far,
// which can double with each level of nested repetition; past this a byte would take seconds and
// gigabytes, so the grammar is refused instead.
constexpr size_t kMaxStepExpansions = size_t{1} << 17;
constexpr uint32_t kExpandedFlag = 0x80000000;  // element positions stay below 2^31 (GrammarLimits)
}  // namespace

StackMachine::StackMachine(const Grammar& grammar) : grammar_(grammar) {
  terminal_.resize(grammar.element_count(), nullptr);
  for (uint32_t pos = 0; pos < grammar.element_count(); ++pos)
    if (grammar.element(pos).kind == ElementKind::bytes) terminal_[pos] = &grammar.byte_set(grammar.element(pos).arg);
  keys_.assign(64, 0);
  values_.assign(64, 0);
  stamps_.assign(64, 0);
}

void StackMachine::begin_step() {
  ++step_;
  used_ = 0;
  expansions_ = 0;
}

uint32_t StackMachine::intern(uint32_t pos, uint32_t parent, bool* fresh) {
  if ((used_ + 1) * 2 > keys_.size()) {
    // Grow and rehash the live entries of this step.
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<uint32_t> old_values = std::move(values_), old_stamps = std::move(stamps_);
    keys_.assign(old_keys.size() * 2, 0);
    values_.assign(old_keys.size() * 2, 0);
    stamps_.assign(old_keys.size() * 2, 0);
    const size_t mask = keys_.size() - 1;
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_stamps[i] != step_) continue;
      size_t h = (old_keys[i] * 0x9E3779B97F4A7C15ull) >> 20 & mask;
      while (stamps_[h] == step_) h = (h + 1) & mask;
      keys_[h] = old_keys[i];
      values_[h] = old_values[i];
      stamps_[h] = step_;
    }
  }
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  const size_t mask = keys_.size() - 1;
  size_t h = (key * 0x9E3779B97F4A7C15ull) >> 20 & mask;
  while (stamps_[h] == step_) {
    if (keys_[h] == key) {
      if (fresh) *fresh = false;
      return values_[h];
    }
    h = (h + 1) & mask;
  }
  stamps_[h] = step_;
  keys_[h] = key;
  values_[h] = static_cast<uint32_t>(nodes_.size());
  ++used_;
  nodes_.push_back(StackNode{pos, parent});
  if (fresh) *fresh = true;
  return values_[h];
}

void StackMachine::expand(uint32_t pos, uint32_t parent, uint32_t self, std::vector<uint32_t>& out, StepFlags& flags, int depth) {
  if (depth > kMaxExpandDepth)
    throw GrammarError("nesting", "grammar: rules nest more than " + std::to_string(kMaxExpandDepth) +
                                      " levels without consuming a byte; flatten the grammar");
  if (++expansions_ > kMaxStepExpansions)
    throw GrammarError("ambiguity", "grammar: more than " + std::to_string(kMaxStepExpansions) +
                                        " ways to read one byte (nested repetitions of one another); make the grammar less ambiguous");
  const Element& e = grammar_.element(pos);
  switch (e.kind) {
    case ElementKind::bytes:
      // Duplicates are removed once per step (dedupe_tops): most steps have one top, no hashing.
      out.push_back(self != kRootParent ? self : push_node(pos, parent));
      return;
    case ElementKind::end:
      if (parent == kRootParent) {
        flags.accept = true;
      } else if (parent == kOpenParent) {
        flags.open_end = true;
      } else {
        const StackNode p = nodes_[parent];
        expand(p.pos, p.parent, parent, out, flags, depth + 1);
      }
      return;
    case ElementKind::rule: {
      // Expanded already in this step? The mark lives beside the nodes under a flagged key.
      bool fresh = true;
      intern(pos | kExpandedFlag, parent, &fresh);
      if (!fresh) return;
      // A reference last in its sequence returns straight to the parent (no growth for x*).
      const uint32_t ret = grammar_.element(pos + 1).kind == ElementKind::end ? parent : intern(pos + 1, parent);
      for (uint32_t alt : grammar_.alternatives(e.arg)) expand(alt, ret, kRootParent, out, flags, depth + 1);
      return;
    }
  }
}

void StackMachine::dedupe_tops(std::vector<uint32_t>& tops, size_t from) {
  if (tops.size() - from < 2) return;
  auto key = [&](uint32_t id) { return (uint64_t{nodes_[id].pos} << 32) | nodes_[id].parent; };
  std::sort(tops.begin() + static_cast<std::ptrdiff_t>(from), tops.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  tops.erase(std::unique(tops.begin() + static_cast<std::ptrdiff_t>(from), tops.end(),
                         [&](uint32_t a, uint32_t b) { return key(a) == key(b); }),
             tops.end());
}

void StackMachine::start_root(std::vector<uint32_t>& tops, StepFlags& flags) {
  begin_step();
  const size_t from = tops.size();
  for (uint32_t alt : grammar_.alternatives(grammar_.root())) expand(alt, kRootParent, kRootParent, tops, flags, 0);
  dedupe_tops(tops, from);
}

void StackMachine::start_at(uint32_t pos, uint32_t parent, std::vector<uint32_t>& tops, StepFlags& flags) {
  begin_step();
  const size_t from = tops.size();
  expand(pos, parent, kRootParent, tops, flags, 0);
  dedupe_tops(tops, from);
}

void StackMachine::advance(std::span<const uint32_t> tops, uint8_t b, std::vector<uint32_t>& out, StepFlags& flags) {
  begin_step();
  const size_t from = out.size();
  for (uint32_t t : tops) {
    const StackNode n = nodes_[t];
    if (!terminal_[n.pos]->has(b)) continue;
    // Fast path: the next element is a terminal too (inside a literal).
    if (terminal_[n.pos + 1]) {
      out.push_back(push_node(n.pos + 1, n.parent));
      continue;
    }
    expand(n.pos + 1, n.parent, kRootParent, out, flags, 0);
  }
  dedupe_tops(out, from);
}

bool StackMachine::any_accepts(std::span<const uint32_t> tops, uint8_t b) const {
  for (uint32_t t : tops)
    if (terminal_[nodes_[t].pos]->has(b)) return true;
  return false;
}

}  // namespace sanctum::grammar
