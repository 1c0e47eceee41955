#pragma once
// An MLX-quantized weight repacked once at load for the int8 kernels (matmul_int8.cc), kept in
// Weight::packed. Those kernels read 16 weight rows at a time, 64 bytes of each per step, with rows
// in vector lanes; in the checkpoint's row-major layout that is 16 streams at once (no sequential
// pattern for the hardware prefetchers) plus a transpose of every block's scales and biases on every
// call. The repacked form is the same bytes reordered, so it means the same numbers:
//   codes: per 16-row block b, per 64-byte step t of a row (the row's packed words, zero padded to
//     `loads` * 64 bytes), the 16 rows' 64 bytes one after another:
//       byte j of row 16b + i  at  ((b * loads + j / 64) * 16 + i) * 64 + j % 64
//     so a block is read front to back as one stream.
//   records: per (block b, group g), the 16 rows' scale and bias in the checkpoint's dtype:
//     bf16: 16 u32 words, word i = scale(16b + i, g) << 16 | bias(16b + i, g)   (64 bytes)
//     f16:  16 scales, then 16 biases                                           (64 bytes)
//     f32:  16 scales, then 16 biases                                           (128 bytes)
//     ordered (b, g), so one block's records are one contiguous run.
// Rows past the last (the tail of the last block) repeat the last row. The checkpoint's own pages of
// the weight are handed back once the copy exists (release_mapped_pages): in int8 mode the matmuls
// and the embedding lookup of a tied table read the copy, so those pages are not faulted in again.
#include <cstdint>
#include <memory>

#include "tensor/dtype.h"
#include "tensor/weight.h"

namespace sanctum::ops::cpu {

struct Int8Weight {
  int64_t rows = 0, groups = 0, blocks = 0;
  int64_t loads = 0;                 // 64-byte steps per row
  DType dtype = DType::bf16;         // of the records (the checkpoint's scale dtype)
  int64_t record_bytes = 0;          // 64 (bf16, f16) or 128 (f32)
  std::shared_ptr<void> storage;     // codes, then records; page aligned
  const uint8_t* codes = nullptr;    // blocks * loads * 16 * 64 bytes
  const uint8_t* records = nullptr;  // blocks * groups records

  const uint8_t* block_codes(int64_t b) const { return codes + b * loads * 1024; }
  const uint8_t* record(int64_t b, int64_t g) const { return records + (b * groups + g) * record_bytes; }
  // The 16 packed u32 words of row r at step t (its words 16t .. 16t + 15).
  const uint32_t* row_words(int64_t r, int64_t t) const {
    return reinterpret_cast<const uint32_t*>(block_codes(r / 16) + (t * 16 + r % 16) * 64);
  }
  float scale(int64_t r, int64_t g) const { return at(r, g, false); }
  float bias(int64_t r, int64_t g) const { return at(r, g, true); }

 private:
  float at(int64_t r, int64_t g, bool bias) const {
    const uint8_t* rec = record(r / 16, g);
    const int64_t i = r % 16;
    switch (dtype) {
      case DType::bf16: {
        const uint32_t word = reinterpret_cast<const uint32_t*>(rec)[i];
        return bf16_to_f32(static_cast<uint16_t>(bias ? word & 0xFFFFu : word >> 16));
      }
      case DType::f16: return f16_to_f32(reinterpret_cast<const uint16_t*>(rec)[i + (bias ? 16 : 0)]);
      default: return reinterpret_cast<const float*>(rec)[i + (bias ? 16 : 0)];
    }
  }
};

// The repacked form of w when the int8 kernels prepared one (prepare_weight_int8), else null.
inline const Int8Weight* int8_weight(const Weight& w) { return static_cast<const Int8Weight*>(w.packed.get()); }

}  // namespace sanctum::ops::cpu
