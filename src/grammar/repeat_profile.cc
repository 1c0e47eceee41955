#include "grammar/repeat_profile.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>

#include "grammar/stack_machine.h"

namespace sanctum::grammar {

size_t RepeatProfile::memory_bytes() const {
  return ids.size() * sizeof(int32_t) + upto.size() * sizeof(uint32_t) + candidates.size() * sizeof(Candidate) +
         overflow.size() * sizeof(uint32_t);
}

namespace {

// The walk through a canonical chain with the count factored out of its states. Every stack of the
// walk ends in one chain node (a body's return, which says how many bodies have started: its count)
// or is a mark (the repeat was left at a count). Below the chain's last count every C_n has the same
// shape, so what a byte does to a state depends only on each stack's part above its chain node and
// its count relative to the state's smallest. Each such transition is computed once with the real
// machine, on stacks rebuilt at the actual counts, and replayed from a table for every later token:
// a token's bytes then cost a lookup each instead of a machine step over every top.
class CountedWalk {
 public:
  static constexpr int32_t kDead = -1;  // no stack inside the repeat: nothing can follow

  struct Step {
    int32_t state = kDead;
    uint32_t count = 0;                     // the smallest count of its stacks
    uint32_t exit = RepeatProfile::kNever;  // the smallest count at which a stack left the repeat here
    bool overflow = false;                  // a stack left at the chain's last count here
  };

  CountedWalk(const Grammar& grammar, const CanonicalChain& chain, std::span<const uint32_t> above) : machine_(grammar), chain_(chain) {
    // The start: one stack, the positions above the chain's entry (the first body's return), count 0.
    std::vector<uint32_t> key{0, static_cast<uint32_t>(above.size())};
    key.insert(key.end(), above.begin(), above.end());
    start_ = intern(key, 0);
  }

  Step start() const { return Step{start_, 0, RepeatProfile::kNever, false}; }

  Step advance(int32_t state, uint32_t count, uint8_t byte) {
    const size_t slot = static_cast<size_t>(state) * 256 + byte;
    if (count + span_[static_cast<size_t>(state)] < chain_.length && table_[slot].known) {
      const Transition& t = table_[slot];
      return Step{t.next, count + t.shift, t.exit == RepeatProfile::kNever ? t.exit : count + t.exit, false};
    }
    return compute(state, count, byte);
  }

 private:
  struct Transition {
    bool known = false;
    int32_t next = kDead;
    uint32_t shift = 0;                     // the next state's count minus this one's
    uint32_t exit = RepeatProfile::kNever;  // relative to this state's count
  };

  // The chain node of a stack at `count`: the entry for the first body, else the return after C_n-1's.
  uint32_t chain_node(uint32_t count) const { return count == 0 ? chain_.entry : chain_.base + 5 * (count - 1) + 1; }

  // A state's key: per stack (sorted, no duplicates) its count relative to the smallest, its length
  // and its positions top first down to just above the chain node.
  int32_t intern(const std::vector<uint32_t>& key, uint32_t span) {
    const std::string bytes(reinterpret_cast<const char*>(key.data()), key.size() * sizeof(uint32_t));
    auto [it, inserted] = ids_.try_emplace(bytes, static_cast<int32_t>(keys_.size()));
    if (inserted) {
      keys_.push_back(key);
      span_.push_back(span);
      table_.resize(table_.size() + 256);
    }
    return it->second;
  }

  Step compute(int32_t state, uint32_t count, uint8_t byte) {
    const size_t mark = machine_.arena_size();
    // Rebuild the state's stacks at their real counts.
    tops_.clear();
    const std::vector<uint32_t>& key = keys_[static_cast<size_t>(state)];
    for (size_t i = 0; i < key.size(); i += 2 + key[i + 1]) {
      const uint32_t* pos = key.data() + i + 2;
      uint32_t parent = machine_.push_node(chain_node(count + key[i]), kOpenParent);
      for (size_t j = key[i + 1]; j-- > 1;) parent = machine_.push_node(pos[j], parent);
      tops_.push_back(machine_.push_node(pos[0], parent));
    }
    next_.clear();
    StepFlags flags;
    machine_.advance(tops_, byte, next_, flags);

    Step step;
    stacks_.clear();
    uint32_t low = RepeatProfile::kNever, high = 0;
    for (const uint32_t t : next_) {
      const uint32_t pos = machine_.node(t).pos;
      if (const int64_t n = chain_.exit(pos); n >= 0) {
        step.overflow = step.overflow || static_cast<uint32_t>(n) == chain_.length;
        step.exit = std::min(step.exit, static_cast<uint32_t>(n));
        continue;
      }
      std::vector<uint32_t> stack{0, 0};
      uint32_t id = t;
      for (; machine_.node(id).parent != kOpenParent; id = machine_.node(id).parent) stack.push_back(machine_.node(id).pos);
      const int64_t n = chain_.inside(machine_.node(id).pos);
      SANCTUM_CHECK(n >= 0, ErrorKind::internal, "grammar: a repeat's stack does not end in its canonical chain");
      stack[0] = static_cast<uint32_t>(n);
      stack[1] = static_cast<uint32_t>(stack.size() - 2);
      low = std::min(low, stack[0]);
      high = std::max(high, stack[0]);
      stacks_.push_back(std::move(stack));
    }
    machine_.truncate(mark);
    if (!stacks_.empty()) {
      for (auto& s : stacks_) s[0] -= low;
      std::sort(stacks_.begin(), stacks_.end());
      stacks_.erase(std::unique(stacks_.begin(), stacks_.end()), stacks_.end());
      std::vector<uint32_t> next_key;
      for (const auto& s : stacks_) next_key.insert(next_key.end(), s.begin(), s.end());
      step.state = intern(next_key, high - low);
      step.count = low;
    }
    // Replayable only where no stack met the chain's last count, which alone differs from the rest.
    if (count + span_[static_cast<size_t>(state)] < chain_.length) {
      Transition& t = table_[static_cast<size_t>(state) * 256 + byte];
      t.known = true;
      t.next = step.state;
      t.shift = step.state == kDead ? 0 : step.count - count;
      t.exit = step.exit == RepeatProfile::kNever ? step.exit : step.exit - count;
    }
    return step;
  }

  StackMachine machine_;
  const CanonicalChain& chain_;
  int32_t start_ = kDead;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::vector<uint32_t>> keys_;  // per state
  std::vector<uint32_t> span_;               // per state: its largest relative count
  std::vector<Transition> table_;            // state * 256 + byte
  std::vector<uint32_t> tops_, next_;
  std::vector<std::vector<uint32_t>> stacks_;
};

// One depth of a token's walk; overflow is sticky: a stack left at the chain's last count here or before.
struct Level {
  CountedWalk::Step step;
  bool overflow;
};

}  // namespace

RepeatProfile build_repeat_profile(const Grammar& grammar, const Vocabulary& vocab, std::span<const uint32_t> above,
                                   const CanonicalChain& chain, const ByteSet* follow, std::span<const uint32_t> indices) {
  CountedWalk walk(grammar, chain, above);
  std::vector<Level> levels{{walk.start(), false}};
  // Accepted ids bucketed by the further bodies they need, each bucket in index order.
  std::vector<std::vector<int32_t>> accepted(size_t{chain.length} + 1);
  RepeatProfile profile;
  std::string_view prev;
  for (const uint32_t index : indices) {
    const std::string_view s = vocab.sorted_bytes(index);
    size_t l = 0;
    const size_t m = std::min(prev.size(), s.size());
    while (l < m && prev[l] == s[l]) ++l;
    prev = s;
    if (levels.size() > l + 1) levels.resize(l + 1);
    size_t d = levels.size() - 1;
    while (d < s.size() && levels[d].step.state != CountedWalk::kDead) {
      const CountedWalk::Step step = walk.advance(levels[d].step.state, levels[d].step.count, static_cast<uint8_t>(s[d]));
      levels.push_back(Level{step, levels[d].overflow || step.overflow});
      ++d;
    }
    // It used every count the chain has: where the repeat allows more, it is walked for real.
    if (levels[d].overflow) profile.overflow.push_back(index);
    uint32_t accept = RepeatProfile::kNever, exit = RepeatProfile::kNever;
    if (d == s.size()) {
      const CountedWalk::Step& last = levels[d].step;
      accept = std::min(last.state != CountedWalk::kDead ? last.count : RepeatProfile::kNever, last.exit);
    }
    // Left mid-token: only a byte the follower can start with keeps that stack going.
    for (size_t e = 1; e <= d && e < s.size(); ++e)
      if (levels[e].step.exit < exit && (!follow || follow->has(static_cast<uint8_t>(s[e])))) exit = levels[e].step.exit;
    if (accept != RepeatProfile::kNever) accepted[accept].push_back(vocab.sorted()[index]);
    if (exit < accept) profile.candidates.push_back({index, exit, accept});
  }

  profile.length = chain.length;
  profile.upto.assign(size_t{chain.length} + 1, 0);
  for (uint32_t n = 0; n <= chain.length; ++n) {
    profile.ids.insert(profile.ids.end(), accepted[n].begin(), accepted[n].end());
    profile.upto[n] = static_cast<uint32_t>(profile.ids.size());
  }
  return profile;
}

}  // namespace sanctum::grammar
