#include "grammar/repeat_profile.h"

#include <algorithm>
#include <string>

#include "grammar/stack_machine.h"

namespace sanctum::grammar {

size_t RepeatProfile::memory_bytes() const {
  return ids.size() * sizeof(int32_t) + upto.size() * sizeof(uint32_t) + candidates.size() * sizeof(Candidate) +
         overflow.size() * sizeof(uint32_t);
}

namespace {

// One depth of the walk: the tops after that many bytes and what they say about the counts.
struct Level {
  size_t tops_begin, tops_end;
  size_t arena_mark;
  uint32_t exit_bodies;    // fewest further bodies of a stack that left the repeat at this depth
  uint32_t inside_bodies;  // fewest further bodies of a stack still inside
  bool alive;              // a stack can take another byte
  bool overflow;           // a stack left at the chain's last count here or before
};

}  // namespace

RepeatProfile build_repeat_profile(const Grammar& grammar, const Vocabulary& vocab, std::span<const uint32_t> above,
                                   const CanonicalChain& chain, const ByteSet* follow, std::span<const uint32_t> indices) {
  StackMachine machine(grammar);
  uint32_t parent = machine.push_node(chain.entry, kOpenParent);
  for (size_t i = above.size(); i-- > 1;) parent = machine.push_node(above[i], parent);
  std::vector<uint32_t> tops, next;
  StepFlags flags;
  machine.start_at(above[0], parent, tops, flags);

  // Reads the counts off the tops in [begin, end): marks are stacks that left the repeat, the rest
  // count by the chain return at their bottom.
  auto level_of = [&](size_t begin, size_t end, bool overflow_before) {
    Level l{begin, end, machine.arena_size(), RepeatProfile::kNever, RepeatProfile::kNever, false, overflow_before};
    for (size_t i = begin; i < end; ++i) {
      const uint32_t pos = machine.node(tops[i]).pos;
      if (const int64_t n = chain.exit(pos); n >= 0) {
        l.overflow = l.overflow || static_cast<uint32_t>(n) == chain.length;
        l.exit_bodies = std::min(l.exit_bodies, static_cast<uint32_t>(n));
        continue;
      }
      l.alive = true;
      uint32_t id = tops[i];
      while (machine.node(id).parent != kOpenParent) id = machine.node(id).parent;
      const int64_t n = chain.inside(machine.node(id).pos);
      SANCTUM_CHECK(n >= 0, ErrorKind::internal, "grammar: a repeat's stack does not end in its canonical chain");
      l.inside_bodies = std::min(l.inside_bodies, static_cast<uint32_t>(n));
    }
    return l;
  };

  std::vector<Level> levels{level_of(0, tops.size(), false)};
  std::vector<std::pair<uint32_t, int32_t>> accepted;  // (further bodies, id)
  RepeatProfile profile;
  const std::string* prev = nullptr;
  for (const uint32_t index : indices) {
    const std::string& s = vocab.bytes(vocab.sorted()[index]);
    size_t l = 0;
    if (prev) {
      const size_t m = std::min(prev->size(), s.size());
      while (l < m && (*prev)[l] == s[l]) ++l;
    }
    prev = &s;
    if (levels.size() > l + 1) {
      levels.resize(l + 1);
      tops.resize(levels.back().tops_end);
      machine.truncate(levels.back().arena_mark);
    }
    size_t d = levels.size() - 1;
    while (d < s.size() && levels[d].alive) {
      next.clear();
      StepFlags step_flags;
      machine.advance(std::span<const uint32_t>(tops.data() + levels[d].tops_begin, levels[d].tops_end - levels[d].tops_begin),
                      static_cast<uint8_t>(s[d]), next, step_flags);
      const size_t begin = tops.size();
      tops.insert(tops.end(), next.begin(), next.end());
      levels.push_back(level_of(begin, tops.size(), levels[d].overflow));
      ++d;
    }
    // It used every count the chain has: where the repeat allows more, it is walked for real.
    if (levels[d].overflow) profile.overflow.push_back(index);
    uint32_t accept = RepeatProfile::kNever, exit = RepeatProfile::kNever;
    if (d == s.size()) accept = std::min(levels[d].alive ? levels[d].inside_bodies : RepeatProfile::kNever, levels[d].exit_bodies);
    // Left mid-token: only a byte the follower can start with keeps that stack going.
    for (size_t e = 1; e <= d && e < s.size(); ++e)
      if (levels[e].exit_bodies < exit && (!follow || follow->has(static_cast<uint8_t>(s[e])))) exit = levels[e].exit_bodies;
    if (accept != RepeatProfile::kNever) accepted.push_back({accept, vocab.sorted()[index]});
    if (exit < accept) profile.candidates.push_back({index, exit, accept});
  }
  machine.truncate(0);

  std::stable_sort(accepted.begin(), accepted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  profile.ids.reserve(accepted.size());
  profile.length = chain.length;
  profile.upto.assign(size_t{chain.length} + 1, 0);
  size_t k = 0;
  for (uint32_t n = 0; n <= chain.length; ++n) {
    while (k < accepted.size() && accepted[k].first <= n) profile.ids.push_back(accepted[k++].second);
    profile.upto[n] = static_cast<uint32_t>(profile.ids.size());
  }
  return profile;
}

}  // namespace sanctum::grammar
