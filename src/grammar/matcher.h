#pragma once
// Per-sequence state of a compiled grammar: which tokens may come next (a bitmask over the
// vocabulary), accepting a sampled token, and rolling back accepted tokens (rejected speculative
// drafts). Cheap to create: it shares the CompiledGrammar and owns only its stacks.
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/stack_machine.h"

namespace sanctum::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(CompiledGrammar compiled);

  // Writes the allowed next tokens into `bitmask` (bit i of word i/32 for token i; vocab.mask_words()
  // words): ordinary tokens the grammar allows, plus the end tokens where the grammar can end.
  void fill_mask(std::span<uint32_t> bitmask);
  // Advances by one token; false (state unchanged) when the grammar does not allow it. An end token
  // is accepted only where can_end(), and terminates the matcher.
  bool accept(int32_t token);
  // Advances by raw text (a forced prefix); false (state unchanged) when not allowed.
  bool accept_bytes(std::string_view text);
  // Undoes the last n accepted tokens (or accept_bytes calls).
  void rollback(size_t n);
  size_t history_size() const { return history_.size() - 1; }

  // The text so far is a complete sentence of the grammar (an end token may come now).
  bool can_end() const { return history_.back().accept; }
  // Nothing but the end can follow: complete with no way to continue, or an end token was accepted.
  bool is_complete() const;
  bool is_terminated() const { return history_.back().terminated; }
  const CompiledGrammar& compiled() const { return compiled_; }

 private:
  struct Step {
    size_t arena_mark;
    size_t tops_begin, tops_end;
    bool accept;
    bool terminated;
  };
  std::span<const uint32_t> tops() const {
    const Step& s = history_.back();
    return std::span<const uint32_t>(tops_.data() + s.tops_begin, s.tops_end - s.tops_begin);
  }

  // The state's content as a StateMaskCache key (into key_); false when too deep to be worth caching.
  bool state_key();
  // The mask from the context masks of each top plus a walk of the tokens they leave uncertain.
  void combine_mask(std::span<uint32_t> bitmask);
  // ORs in the masks of top's context, deepened as needed; returns the deepest (its uncertain tokens
  // are left to walk).
  const PositionMask& apply_context_masks(uint32_t top, std::span<uint32_t> bitmask);

  CompiledGrammar compiled_;
  StackMachine machine_;
  std::vector<uint32_t> tops_;  // every step's tops, back to back
  std::vector<Step> history_;
  std::vector<uint32_t> scratch_, next_, uncertain_, context_;
  // The masks this fill applied (each once), held so that eviction cannot free them mid-fill.
  std::vector<std::shared_ptr<const PositionMask>> held_;
  std::vector<uint32_t> key_, stacks_;
  std::vector<std::pair<uint32_t, uint32_t>> segments_;  // [begin, end) of each top's stack in stacks_
};

}  // namespace sanctum::grammar
