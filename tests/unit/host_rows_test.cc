// HostRows against a plain model: each buffer's rows as a byte vector. Random commits, shares,
// writes (each through make_writable, as the KV cache does) and drops on buffers of several row
// sizes; after every step each buffer reads exactly its model, so a write that lands in pages
// another buffer maps fails here. Sharing must also actually share (the memory file grows by less
// than the shared rows) and give every page back once the last buffer mapping it goes.
#include "tensor/host_rows.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

namespace sanctum {
namespace {

struct Modelled {
  std::shared_ptr<HostRows> rows;
  std::vector<uint8_t> model;  // max_rows * row_bytes; rows past the committed ones are zero
};

void expect_matches(const Modelled& m, const char* after) {
  const size_t n = static_cast<size_t>(m.rows->committed_rows()) * m.rows->row_bytes();
  ASSERT_EQ(std::memcmp(m.rows->data(), m.model.data(), n), 0) << "buffer differs from its model after " << after;
}

void run_random_schedule(size_t row_bytes, bool shareable, uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int64_t kMaxRows = row_bytes < 1000 ? 700 : 1100;  // past one granule of the 5,000-byte rows (512)
  const int steps = row_bytes < 1000 ? 400 : 100;
  const size_t start_allocated = HostRows::allocated_bytes();
  {
    std::vector<Modelled> buffers;
    for (int step = 0; step < steps; ++step) {
      const int64_t op = buffers.empty() ? 0 : pick(0, 5);
      const char* what = "";
      if (op == 0 || (op == 1 && buffers.size() < 2)) {  // a new buffer with some rows
        what = "a commit of a new buffer";
        Modelled m{HostRows::reserve(kMaxRows, row_bytes, shareable), std::vector<uint8_t>(kMaxRows * row_bytes, 0)};
        ASSERT_NE(m.rows, nullptr);
        m.rows->commit(pick(0, kMaxRows));
        buffers.push_back(std::move(m));
      } else if (op == 1) {  // a buffer continuing another's first rows
        what = "a share";
        const Modelled& from = buffers[static_cast<size_t>(pick(0, static_cast<int64_t>(buffers.size()) - 1))];
        const int64_t rows = pick(0, from.rows->committed_rows());
        Modelled m{HostRows::reserve(kMaxRows, row_bytes, shareable), std::vector<uint8_t>(kMaxRows * row_bytes, 0)};
        m.rows->share(*from.rows, rows);
        std::memcpy(m.model.data(), from.model.data(), static_cast<size_t>(rows) * row_bytes);
        buffers.push_back(std::move(m));
      } else if (op <= 3) {  // a write of random bytes to some committed rows
        what = "a write";
        Modelled& m = buffers[static_cast<size_t>(pick(0, static_cast<int64_t>(buffers.size()) - 1))];
        const int64_t committed = m.rows->committed_rows();
        if (committed == 0) continue;
        const int64_t begin = pick(0, committed - 1), end = pick(begin + 1, std::min(committed, begin + 40));
        m.rows->make_writable(begin, end);
        for (size_t i = static_cast<size_t>(begin) * row_bytes; i < static_cast<size_t>(end) * row_bytes; ++i) {
          m.model[i] = static_cast<uint8_t>(rng());
          static_cast<uint8_t*>(m.rows->data())[i] = m.model[i];
        }
      } else if (op == 4) {  // growth
        what = "a commit";
        Modelled& m = buffers[static_cast<size_t>(pick(0, static_cast<int64_t>(buffers.size()) - 1))];
        m.rows->commit(pick(m.rows->committed_rows(), kMaxRows));
      } else {  // a buffer dropped
        what = "a drop";
        buffers.erase(buffers.begin() + pick(0, static_cast<int64_t>(buffers.size()) - 1));
      }
      for (const Modelled& m : buffers) ASSERT_NO_FATAL_FAILURE(expect_matches(m, what)) << "step " << step;
    }
  }
  EXPECT_EQ(HostRows::allocated_bytes(), start_allocated) << "pages outlived every buffer mapping them";
  EXPECT_EQ(HostRows::duplicate_mapped_bytes(), 0u);
}

class HostRowsSchedule : public ::testing::TestWithParam<size_t> {};

TEST_P(HostRowsSchedule, every_buffer_reads_its_own_rows_through_shares_writes_and_drops) {
  for (uint32_t seed : {1u, 2u, 3u}) ASSERT_NO_FATAL_FAILURE(run_random_schedule(GetParam(), true, seed)) << "seed " << seed;
}

TEST_P(HostRowsSchedule, private_buffers_copy_when_shared_and_read_the_same) {
  ASSERT_NO_FATAL_FAILURE(run_random_schedule(GetParam(), false, 4u));
}

// Row sizes: a q8 scale row of a small model, odd ones, a page, more than a page.
INSTANTIATE_TEST_SUITE_P(RowSizes, HostRowsSchedule, ::testing::Values(size_t{8}, size_t{24}, size_t{136}, size_t{4096}, size_t{5000}));

TEST(HostRows, a_share_maps_whole_pages_and_copies_only_the_partial_one) {
  constexpr size_t kRowBytes = 512;  // 8 rows a page
  constexpr size_t kPage = 4096;
  const size_t base = HostRows::allocated_bytes();
  auto a = HostRows::reserve(4096, kRowBytes);
  ASSERT_TRUE(a->shareable()) << "no memory file on this kernel";
  a->commit(1003);
  std::memset(a->data(), 7, 1003 * kRowBytes);
  EXPECT_EQ(HostRows::allocated_bytes() - base, 126 * kPage);
  auto b = HostRows::reserve(4096, kRowBytes);
  b->share(*a, 1003);  // 125 whole pages mapped, 3 rows copied into a page of b's own
  EXPECT_EQ(HostRows::allocated_bytes() - base, 127 * kPage);
  EXPECT_EQ(HostRows::duplicate_mapped_bytes(), 125 * kPage);
  // b writes a shared row: that page (only) becomes b's own, and a keeps its bytes.
  b->make_writable(10, 11);
  static_cast<char*>(b->data())[10 * kRowBytes] = 1;
  EXPECT_EQ(static_cast<char*>(a->data())[10 * kRowBytes], 7);
  EXPECT_EQ(HostRows::allocated_bytes() - base, 128 * kPage);
  // a writes a row b maps: a copies that page first.
  a->make_writable(100, 101);
  static_cast<char*>(a->data())[100 * kRowBytes] = 2;
  EXPECT_EQ(static_cast<char*>(b->data())[100 * kRowBytes], 7);
  EXPECT_EQ(HostRows::allocated_bytes() - base, 129 * kPage);
  a.reset();  // what b maps stays; a's page b copied out and a's own copy go back
  EXPECT_EQ(HostRows::duplicate_mapped_bytes(), 0u);
  EXPECT_EQ(HostRows::allocated_bytes() - base, 126 * kPage);
  b->make_writable(0, 1003);  // b's alone now: made writable in place, nothing copied
  EXPECT_EQ(HostRows::allocated_bytes() - base, 126 * kPage);
  static_cast<char*>(b->data())[0] = 3;
  b.reset();
  EXPECT_EQ(HostRows::allocated_bytes(), base);
}

TEST(HostRows, a_shared_page_is_read_only_until_made_writable) {
  auto a = HostRows::reserve(64, 4096);
  ASSERT_TRUE(a->shareable());
  a->commit(4);
  auto b = HostRows::reserve(64, 4096);
  b->share(*a, 4);
  EXPECT_DEATH(static_cast<volatile char*>(b->data())[0] = 1, "");
}

TEST(HostRows, commit_past_the_reservation_is_refused) {
  auto a = HostRows::reserve(10, 100);
  EXPECT_ANY_THROW(a->commit(11));
}

}  // namespace
}  // namespace sanctum
