#pragma once
// A grammar bound to a vocabulary, with per-position token masks. For each byte terminal a stack top
// can sit at, the tokens split into those accepted whatever lies below the top (context-independent:
// stored), those rejected whatever lies below (dropped), and the few that run past the end of the
// top's rule (checked against the real stack at each step). Masks are computed the first time a
// position is reached, or all at once by precompute_all().
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/vocabulary.h"

namespace sanctum::grammar {

struct PositionMask {
  enum class Form : uint8_t { accepted_ids, all_but_ids, bitset };
  Form form = Form::accepted_ids;
  std::vector<int32_t> ids;      // accepted_ids: the accepted ids; all_but_ids: ordinary ids not accepted
  std::vector<uint32_t> bits;    // bitset: the accepted ids
  std::vector<uint32_t> uncertain;  // sorted-vocabulary indices, ascending
  size_t accepted_count = 0;

  // ORs the context-independent accepted tokens into `mask`.
  void apply(std::span<uint32_t> mask, const Vocabulary& vocab) const;
  size_t memory_bytes() const;
};

struct CompileStats {
  size_t rules = 0, elements = 0, terminals = 0;
  size_t masks_computed = 0, mask_bytes = 0, uncertain_tokens = 0;
};

class CompiledGrammar {
 public:
  CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab);

  const Grammar& grammar() const { return *impl_->grammar; }
  const Vocabulary& vocab() const { return *impl_->vocab; }
  // The mask of a byte-terminal position, computed on first use (thread-safe).
  const PositionMask& mask_at(uint32_t pos) const;
  // Computes every position's mask now (so the first requests pay nothing); returns the count.
  size_t precompute_all() const;
  CompileStats stats() const;

 private:
  struct Impl {
    std::shared_ptr<const Grammar> grammar;
    std::shared_ptr<const Vocabulary> vocab;
    std::vector<uint32_t> terminal_positions;
    std::unique_ptr<std::once_flag[]> once;
    std::vector<std::unique_ptr<PositionMask>> masks;
  };
  std::shared_ptr<Impl> impl_;
};

// Builds a position's mask by walking the whole vocabulary from a lone stack top (exposed for tests).
PositionMask compute_position_mask(const Grammar& grammar, const Vocabulary& vocab, uint32_t pos);

}  // namespace sanctum::grammar
