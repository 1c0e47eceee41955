#pragma once
// The pushdown automaton that runs a Grammar over bytes. A stack is a chain of nodes (position,
// parent) in an arena, so stacks share their tails; a state is the set of stack tops, each at a byte
// terminal. Advancing by one byte moves every top whose terminal holds the byte and expands rule
// references and rule ends until every top is again at a terminal.
#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"

namespace sanctum::grammar {

constexpr uint32_t kRootParent = 0xFFFFFFFF;  // below the root rule: reaching it completes the grammar
constexpr uint32_t kOpenParent = 0xFFFFFFFE;  // an unknown context (per-position mask precomputation)

struct StackNode {
  uint32_t pos;     // element index: a byte terminal for tops, the return position for parents
  uint32_t parent;  // node id, kRootParent or kOpenParent
};

// What one step produced besides the new tops.
struct StepFlags {
  bool accept = false;    // a stack emptied: the grammar can end here
  bool open_end = false;  // a stack reached kOpenParent: the rest depends on the unknown context
};

class StackMachine {
 public:
  explicit StackMachine(const Grammar& grammar);

  // Tops of the stacks that start at `pos` with the given parent (the initial state is
  // start(first position of each root alternative, kRootParent)).
  void start_root(std::vector<uint32_t>& tops, StepFlags& flags);
  void start_at(uint32_t pos, uint32_t parent, std::vector<uint32_t>& tops, StepFlags& flags);
  // Tops after byte b; `tops` and `out` must differ.
  void advance(std::span<const uint32_t> tops, uint8_t b, std::vector<uint32_t>& out, StepFlags& flags);
  bool any_accepts(std::span<const uint32_t> tops, uint8_t b) const;

  // Adds a node outside any step (a known context below a top); returns its id.
  uint32_t push_node(uint32_t pos, uint32_t parent) {
    nodes_.push_back(StackNode{pos, parent});
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  const StackNode& node(uint32_t id) const { return nodes_[id]; }
  size_t arena_size() const { return nodes_.size(); }
  // Forgets nodes created after `mark` (scratch walks, rollback).
  void truncate(size_t mark) { nodes_.resize(mark); }
  const Grammar& grammar() const { return grammar_; }

 private:
  void begin_step();
  void dedupe_tops(std::vector<uint32_t>& tops, size_t from);
  uint32_t intern(uint32_t pos, uint32_t parent, bool* fresh = nullptr);
  void expand(uint32_t pos, uint32_t parent, uint32_t self, std::vector<uint32_t>& out, StepFlags& flags, int depth);

  const Grammar& grammar_;
  std::vector<const ByteSet*> terminal_;  // per element: its byte set, or null
  std::vector<StackNode> nodes_;
  // Per-step table (pos, parent) -> node id: equal stacks built in one step share one node.
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> values_, stamps_;
  size_t used_ = 0;
  uint32_t step_ = 0;
  size_t expansions_ = 0;  // expand() calls this step (bounded: see stack_machine.cc)
};

}  // namespace sanctum::grammar
