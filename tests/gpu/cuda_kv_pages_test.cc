// GPU KV caches over mapped granules (tensor/device_rows.h): growing keeps the rows where they are,
// continuations of one snapshot map its whole granules instead of copying them, and a write into
// a shared granule copies it first, so no handle ever sees another's writes. Checked by reading the
// rows back and by the allocator's counts; they fail if growth moved the rows, a continuation copied
// the prefix, or a write landed in memory another handle maps.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/tuning.h"
#include "gpu_test_util.h"
#include "model/state.h"
#include "tensor/device_memory.h"
#include "tensor/device_rows.h"

namespace sanctum {
namespace {

constexpr size_t kRowBytes = 2048;  // two kv heads of 256 in f32: 1,024 rows a 2 MiB granule
constexpr int64_t kHeads = 2, kHeadDim = 256;

class CudaKvPages : public test::RequiresGpu {
 protected:
  void SetUp() override {
    test::RequiresGpu::SetUp();
    if (IsSkipped()) return;
    if (DeviceRows::granule_rows_for(kRowBytes) == 0) GTEST_SKIP() << "this GPU maps no granules";
    granule_ = DeviceRows::granule_rows_for(kRowBytes);
  }
  int64_t granule_ = 0;
};

// Rows [begin, end) of `rows` set to bytes of `value`, through plain copies.
void fill(const RowMemory& rows, int64_t begin, int64_t end, uint8_t value) {
  const std::vector<uint8_t> host(static_cast<size_t>(end - begin) * rows.row_bytes(), value);
  device_memory::cuda_copy(static_cast<char*>(rows.data()) + static_cast<size_t>(begin) * rows.row_bytes(), host.data(), host.size(),
                           device_memory::CopyKind::host_to_device);
}

// The first and last byte of each row in [0, n) (a row is written whole or not at all).
std::vector<uint8_t> row_bytes_of(const RowMemory& rows, int64_t n) {
  std::vector<uint8_t> host(static_cast<size_t>(n) * rows.row_bytes());
  device_memory::cuda_copy(host.data(), rows.data(), host.size(), device_memory::CopyKind::device_to_host);
  std::vector<uint8_t> out;
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t first = host[static_cast<size_t>(r) * rows.row_bytes()], last = host[static_cast<size_t>(r + 1) * rows.row_bytes() - 1];
    out.push_back(first == last ? first : 0xEE);
  }
  return out;
}

// Lets buffers dropped earlier go (their unmapping waits for the stream; reserve() collects them).
void settle() {
  device_memory::cuda_synchronize();
  (void)DeviceRows::reserve(1, kRowBytes);
}

TEST_F(CudaKvPages, growing_maps_granules_behind_the_rows_without_moving_them) {
  settle();
  const size_t before = DeviceRows::allocated_bytes(), in_use = device_memory::cuda_memory_in_use();
  auto rows = DeviceRows::reserve(5 * granule_ + 7, kRowBytes);
  ASSERT_NE(rows, nullptr);
  void* at = rows->data();
  rows->commit(100);
  EXPECT_EQ(DeviceRows::allocated_bytes() - before, static_cast<size_t>(granule_) * kRowBytes);
  EXPECT_EQ(device_memory::cuda_memory_in_use() - in_use, static_cast<size_t>(granule_) * kRowBytes) << "granules count against the limit";
  fill(*rows, 0, 100, 7);
  rows->commit(3 * granule_ + 5);
  EXPECT_EQ(rows->data(), at);
  EXPECT_EQ(DeviceRows::allocated_bytes() - before, static_cast<size_t>(4 * granule_) * kRowBytes);
  const auto got = row_bytes_of(*rows, 3 * granule_ + 5);
  for (int64_t r = 0; r < 3 * granule_ + 5; ++r) ASSERT_EQ(got[static_cast<size_t>(r)], r < 100 ? 7 : 0) << "row " << r;
  EXPECT_THROW(rows->commit(6 * granule_), Error);
  rows.reset();
  settle();
  EXPECT_EQ(DeviceRows::allocated_bytes(), before);
  EXPECT_EQ(device_memory::cuda_memory_in_use(), in_use);
}

TEST_F(CudaKvPages, a_share_maps_whole_granules_and_copies_the_rest) {
  settle();
  const size_t granule_bytes = static_cast<size_t>(granule_) * kRowBytes;
  const int64_t n = 2 * granule_ + 300;
  auto from = DeviceRows::reserve(4 * granule_, kRowBytes);
  from->commit(n);
  for (int64_t r = 0; r < n; r += 100) fill(*from, r, std::min(n, r + 100), static_cast<uint8_t>(1 + r / 100));
  const size_t before = DeviceRows::allocated_bytes(), duplicate = DeviceRows::duplicate_mapped_bytes();
  auto to = DeviceRows::reserve(4 * granule_, kRowBytes);
  to->share(*from, n);
  EXPECT_EQ(DeviceRows::allocated_bytes() - before, granule_bytes) << "only the partial granule is copied";
  EXPECT_EQ(DeviceRows::duplicate_mapped_bytes() - duplicate, 2 * granule_bytes);
  EXPECT_EQ(row_bytes_of(*to, n), row_bytes_of(*from, n));

  // Writing the shared first granule: the writer gets a copy, the other keeps its bytes.
  to->make_writable(10, 20);
  fill(*to, 10, 20, 200);
  const auto mine = row_bytes_of(*to, n), theirs = row_bytes_of(*from, n);
  for (int64_t r = 0; r < n; ++r) {
    const auto expected = static_cast<uint8_t>(1 + r / 100);
    ASSERT_EQ(theirs[static_cast<size_t>(r)], expected) << "row " << r << " of the shared buffer changed";
    ASSERT_EQ(mine[static_cast<size_t>(r)], r >= 10 && r < 20 ? 200 : expected) << "row " << r;
  }
  EXPECT_EQ(DeviceRows::allocated_bytes() - before, 2 * granule_bytes);
  EXPECT_EQ(DeviceRows::duplicate_mapped_bytes() - duplicate, granule_bytes);

  // The other one gone, the second granule is the writer's alone: written in place.
  from.reset();
  to->make_writable(granule_, granule_ + 1);
  fill(*to, granule_, granule_ + 1, 99);
  EXPECT_EQ(row_bytes_of(*to, n)[static_cast<size_t>(granule_)], 99);
  EXPECT_EQ(DeviceRows::duplicate_mapped_bytes(), duplicate);
}

TEST_F(CudaKvPages, granules_past_the_memory_limit_are_refused_cleanly) {
  settle();
  const size_t in_use = device_memory::cuda_memory_in_use();
  device_memory::set_cuda_memory_limit(in_use + static_cast<size_t>(granule_) * kRowBytes);
  auto rows = DeviceRows::reserve(8 * granule_, kRowBytes);
  rows->commit(granule_);
  EXPECT_THROW(rows->commit(3 * granule_), Error);
  device_memory::set_cuda_memory_limit(0);
  rows->commit(3 * granule_);  // the failed commit left nothing half done
  EXPECT_EQ(rows->committed_rows(), 3 * granule_);
}

// KvCache on the GPU: rows of (kHeads, kHeadDim) f32 set to `value` at [begin, end).
void write(KvCache& cache, int64_t begin, int64_t end, float value) {
  cache.reserve(end);
  const Tensor host = Tensor::zeros({end - begin, kHeads, kHeadDim}, DType::f32);
  std::fill_n(host.data<float>(), host.numel(), value);
  cache.key_rows(begin, end).data.copy_from(host.to(Device::cuda));
  cache.value_rows(begin, end).data.copy_from(host.to(Device::cuda));
}

// Each row's first key value of the n rows a handle holds.
std::vector<float> keys_of(const KvCache& cache, int64_t n) {
  const Tensor host = cache.keys(n).data.to(Device::cpu);
  std::vector<float> out;
  for (int64_t r = 0; r < n; ++r) out.push_back(host.data<float>()[r * kHeads * kHeadDim]);
  return out;
}

SequenceState gpu_state() {
  return SequenceState(std::vector<KvCache>(1, KvCache(kHeads, kHeadDim, Device::cuda, ops::KvCacheDtype::f32, 32768)),
                       std::vector<LinearAttentionState>(1));
}

TEST_F(CudaKvPages, continuations_of_one_snapshot_hold_its_rows_once_and_never_see_each_other) {
  ASSERT_TRUE(KvCache::maps_shared_rows(kHeads, kHeadDim, Device::cuda, ops::KvCacheDtype::f32));
  ASSERT_EQ(KvCache::commit_rows(kHeads, kHeadDim, Device::cuda, ops::KvCacheDtype::f32), granule_);
  settle();
  constexpr int64_t kPrompt = 3000;
  SequenceState s = gpu_state();
  for (int64_t r = 0; r < kPrompt; r += 500) write(s.kv(0), r, r + 500, static_cast<float>(r / 500));
  s.advance(kPrompt);
  const void* prompt_rows = s.kv(0).keys(0).data.raw();
  const auto snap = s.snapshot();
  s = SequenceState();
  const size_t before = DeviceRows::allocated_bytes();
  std::vector<SequenceState> sequences(4);
  for (size_t q = 0; q < sequences.size(); ++q) {
    sequences[q].restore(*snap);
    for (int i = 0; i < 40; ++i) {
      write(sequences[q].kv(0), sequences[q].length(), sequences[q].length() + 1, 100.0f + static_cast<float>(q));
      sequences[q].advance(1);
    }
  }
  for (size_t q = 0; q < sequences.size(); ++q) {
    const auto keys = keys_of(sequences[q].kv(0), kPrompt + 40);
    for (int64_t r = 0; r < kPrompt + 40; ++r)
      ASSERT_EQ(keys[static_cast<size_t>(r)], r < kPrompt ? static_cast<float>(r / 500) : 100.0f + static_cast<float>(q))
          << "sequence " << q << " row " << r;
  }
  // The first continues the snapshot's storage in place; the other three map its two whole
  // granules and hold one granule each for K and for V (the prompt's tail and their rows).
  const size_t granule_bytes = static_cast<size_t>(granule_) * kRowBytes;
  EXPECT_EQ(DeviceRows::allocated_bytes() - before, 3 * 2 * granule_bytes);
  EXPECT_EQ(sequences[0].kv(0).keys(0).data.raw(), prompt_rows);

  // Growing past the reservation's first granules keeps the addresses (a recorded step stays valid).
  const void* at = sequences[1].kv(0).keys(0).data.raw();
  write(sequences[1].kv(0), kPrompt + 40, kPrompt + 40 + 2 * granule_, 7.0f);
  EXPECT_EQ(sequences[1].kv(0).keys(0).data.raw(), at);

  // Rolled back below the snapshot's rows and written there: a copy first, the snapshot unchanged.
  SequenceState t = gpu_state();
  t.restore(*snap, 10);
  write(t.kv(0), 10, 20, 55.0f);
  t.advance(10);
  SequenceState reader = gpu_state();
  reader.restore(*snap);
  const auto kept = keys_of(reader.kv(0), kPrompt);
  for (int64_t r = 0; r < kPrompt; ++r) ASSERT_EQ(kept[static_cast<size_t>(r)], static_cast<float>(r / 500)) << "row " << r;
  const auto rolled = keys_of(t.kv(0), 20);
  for (int64_t r = 0; r < 20; ++r) ASSERT_EQ(rolled[static_cast<size_t>(r)], r < 10 ? 0.0f : 55.0f) << "row " << r;
}

TEST_F(CudaKvPages, with_the_knob_off_gpu_caches_copy_as_before) {
  Tuning tuning = Tuning::from_environment();
  tuning.set(Knob::kv_shared_pages, false);
  const ScopedTuning use(tuning);
  EXPECT_FALSE(KvCache::maps_shared_rows(kHeads, kHeadDim, Device::cuda, ops::KvCacheDtype::f32));
  EXPECT_EQ(KvCache::commit_rows(kHeads, kHeadDim, Device::cuda, ops::KvCacheDtype::f32), KvCache::kBlockTokens);
  settle();
  const size_t before = DeviceRows::allocated_bytes();
  SequenceState s = gpu_state();
  write(s.kv(0), 0, 300, 3.0f);
  s.advance(300);
  EXPECT_EQ(DeviceRows::allocated_bytes(), before);
  EXPECT_EQ(keys_of(s.kv(0), 300), std::vector<float>(300, 3.0f));
}

}  // namespace
}  // namespace sanctum
