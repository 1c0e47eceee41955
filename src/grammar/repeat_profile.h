#pragma once
// The masks of a bounded repeat for every count at once. Inside `x{0,40}` each count is its own
// stack context, so without this every position of a bounded string walks the vocabulary again.
// A profile walks the tokens once through the body's canonical chain (CanonicalChain) and keeps, per
// token, the fewest further bodies it needs to be accepted inside the repeat or by leaving it exactly
// at its end, and the fewest after which it leaves the repeat mid-token onto a byte the repeat's
// follower can take. At a count `remaining`, the accepted tokens are a prefix of the first list and
// only the second list's tokens (few: those that close the repeat and go on) are walked against
// the real stack.
#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/vocabulary.h"

namespace sanctum::grammar {

struct RepeatProfile {
  struct Candidate {
    uint32_t index;          // sorted-vocabulary index
    uint32_t exit_bodies;    // fewest further bodies before it leaves the repeat mid-token
    uint32_t accept_bodies;  // fewest further bodies for acceptance without the follower (kNever: none)
  };
  static constexpr uint32_t kNever = 0xFFFFFFFF;

  std::vector<int32_t> ids;           // accepted tokens, by the further bodies they need, ascending
  std::vector<uint32_t> upto;         // upto[n]: ids[0, upto[n]) need at most n further bodies
  std::vector<Candidate> candidates;  // ascending index
  // Tokens that reach the chain's last count (ascending index): exact only where the repeat allows
  // no more than the chain's length, walked for real where it allows more.
  std::vector<uint32_t> overflow;
  uint32_t length = 0;  // the chain's length

  // How many of `ids` are accepted where `remaining` more bodies may follow.
  size_t accepted(uint32_t remaining) const { return upto.empty() ? 0 : upto[std::min<size_t>(remaining, upto.size() - 1)]; }
  size_t memory_bytes() const;
};

// Walks the tokens at `indices` (sorted-vocabulary, ascending) from the context `above` (top first:
// the positions inside the repeat's body) over `chain`. `follow` is the set of bytes the repeat's
// follower can start with; null when it may take any (it can be left without a byte).
RepeatProfile build_repeat_profile(const Grammar& grammar, const Vocabulary& vocab, std::span<const uint32_t> above,
                                   const CanonicalChain& chain, const ByteSet* follow, std::span<const uint32_t> indices);

}  // namespace sanctum::grammar
