#pragma once
// Walks many tokens through a StackMachine from one state, visiting them in byte order so that a
// shared prefix is advanced once (the sorted vocabulary is an implicit trie).
#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/stack_machine.h"
#include "grammar/vocabulary.h"

namespace sanctum::grammar {

enum class TokenClass : uint8_t {
  accepted,   // every byte matched
  rejected,   // no path matches all bytes
  uncertain,  // a path reached the end of the start rule mid-token: the context decides (open walks)
};

struct WalkLevel {
  size_t tops_begin, tops_end;  // into the walk's tops buffer
  size_t arena_mark;
  bool open_end_upto;  // a path reached the open end at this depth or before
  bool ends_here;      // accept or open end at exactly this depth
};

// Walks the tokens at `indices` (positions in vocab.sorted(), ascending), or every token when
// `indices` is empty and `all` is set, calling on_token(sorted_index, class) for each; with `all`,
// rejected tokens behind a dead prefix are skipped without a call. The machine's arena is restored.
template <class OnToken>
void walk_tokens(StackMachine& machine, const Vocabulary& vocab, std::span<const uint32_t> start_tops, std::span<const uint32_t> indices,
                 bool all, OnToken&& on_token) {
  std::vector<uint32_t> tops(start_tops.begin(), start_tops.end());
  std::vector<uint32_t> next;
  std::vector<WalkLevel> levels;
  const size_t base_mark = machine.arena_size();
  levels.push_back(WalkLevel{0, tops.size(), base_mark, false, false});
  std::string_view prev;
  const size_t n = all ? vocab.sorted().size() : indices.size();
  const auto& lcp = vocab.lcp();
  for (size_t k = 0; k < n; ++k) {
    const uint32_t index = all ? static_cast<uint32_t>(k) : indices[k];
    const std::string_view s = vocab.sorted_bytes(index);
    size_t l = 0;
    if (all) {
      l = k == 0 ? 0 : lcp[k];
    } else {
      const size_t m = std::min(prev.size(), s.size());
      while (l < m && prev[l] == s[l]) ++l;
    }
    prev = s;
    if (levels.size() > l + 1) {
      levels.resize(l + 1);
      tops.resize(levels.back().tops_end);
      machine.truncate(levels.back().arena_mark);
    }
    size_t d = levels.size() - 1;
    while (d < s.size() && levels[d].tops_end > levels[d].tops_begin) {
      next.clear();
      StepFlags flags;
      machine.advance(std::span<const uint32_t>(tops.data() + levels[d].tops_begin, levels[d].tops_end - levels[d].tops_begin),
                      static_cast<uint8_t>(s[d]), next, flags);
      const size_t begin = tops.size();
      tops.insert(tops.end(), next.begin(), next.end());
      const bool upto = levels[d].open_end_upto || flags.open_end;
      levels.push_back(WalkLevel{begin, tops.size(), machine.arena_size(), upto, flags.accept || flags.open_end});
      ++d;
    }
    const WalkLevel& last = levels[d];
    if (d == s.size() && (last.tops_end > last.tops_begin || last.ends_here)) {
      on_token(index, TokenClass::accepted);
      continue;
    }
    // Dead at depth d (or at the token's end with nothing left): an open end strictly inside the
    // token, or at d with bytes remaining, hands the rest to the context.
    const bool open_before = d == s.size() ? (d > 0 && levels[d - 1].open_end_upto) : last.open_end_upto;
    if (open_before) {
      on_token(index, TokenClass::uncertain);
      continue;
    }
    on_token(index, TokenClass::rejected);
    if (all && d < s.size())
      while (k + 1 < n && lcp[k + 1] >= d) ++k;  // the same dead prefix
  }
  machine.truncate(base_mark);
}

}  // namespace sanctum::grammar
