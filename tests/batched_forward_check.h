#pragma once
// The batch that tests/unit/batched_forward_test.cc (CPU, bit for bit) and
// tests/gpu/cuda_batched_forward_test.cc (GPU, within tolerances) run: sequences with a history in
// their state and this step's tokens (prompt pieces, decode rows and verification rows mixed, at odd
// lengths and positions) go through Model::forward_batch together and through forward() alone; the
// caller compares each sequence's rows, then one more step from the states each side left.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "model/model.h"

namespace sanctum::test {

inline std::vector<int32_t> random_ids(std::mt19937& rng, int64_t vocab, size_t n) {
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> out(n);
  for (auto& t : out) t = id(rng);
  return out;
}

// compare(got, want, rows, what): `rows` logits rows of the batch against the solo run's.
template <class Compare>
void compare_batch_with_solo(Model& model, const std::string& label, unsigned seed, Compare&& compare) {
  const int64_t vocab = model.vocab_size();
  std::mt19937 rng(seed);
  struct Case {
    size_t history, step;
    LogitsFor which;
  };
  const std::vector<Case> cases = {{0, 37, LogitsFor::last},  {12, 1, LogitsFor::last}, {70, 5, LogitsFor::all},
                                   {64, 64, LogitsFor::none}, {3, 1, LogitsFor::all},   {129, 130, LogitsFor::last}};
  std::vector<SequenceState> batched, alone;
  std::vector<std::vector<int32_t>> steps;
  for (const Case& c : cases) {
    const auto history = random_ids(rng, vocab, c.history);
    batched.push_back(model.new_state());
    alone.push_back(model.new_state());
    if (!history.empty()) {
      model.forward(history, batched.back(), LogitsFor::none);
      model.forward(history, alone.back(), LogitsFor::none);
    }
    steps.push_back(random_ids(rng, vocab, c.step));
  }
  std::vector<BatchEntry> entries;
  for (size_t i = 0; i < cases.size(); ++i) entries.push_back({steps[i], &batched[i], cases[i].which});
  Tensor rows = model.forward_batch(entries);
  // forward_batch's rows are scratch: copy them before the solo forwards reuse it.
  std::vector<float> got(rows ? rows.data<float>() : nullptr, rows ? rows.data<float>() + rows.numel() : nullptr);
  int64_t at = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    Tensor want = model.forward(steps[i], alone[i], cases[i].which);
    const int64_t n = Model::row_count(entries[i]);
    const std::string what = label + " sequence " + std::to_string(i);
    EXPECT_EQ(batched[i].length(), alone[i].length()) << what;
    if (n == 0) continue;
    ASSERT_EQ(want.dim(0), n) << what;
    compare(got.data() + at * vocab, want.data<float>(), n, what);
    at += n;
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> next = random_ids(rng, vocab, 1);
    Tensor a = model.forward(next, batched[i], LogitsFor::last);
    std::vector<float> first(a.data<float>(), a.data<float>() + vocab);
    Tensor b = model.forward(next, alone[i], LogitsFor::last);
    compare(first.data(), b.data<float>(), 1, label + " state of sequence " + std::to_string(i) + " after the batch");
  }
}

}  // namespace sanctum::test
