#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ops/positions.h"
#include "tensor/tensor.h"

namespace sanctum::ops {

// Rotary position embedding settings as a model config declares them.
struct RopeConfig {
  enum class Type { standard, yarn, linear, llama3 };
  Type type = Type::standard;
  int head_dim = 0;
  int rotary_dim = 0;  // first rotary_dim dims of each head rotate (partial rotary); 0 → head_dim
  double theta = 10000.0;
  double factor = 1.0;                                   // yarn / linear / llama3 scaling factor
  int original_max_position = 0;                         // yarn, llama3
  double beta_fast = 32.0, beta_slow = 1.0;              // yarn
  double mscale = 1.0, mscale_all_dim = 0.0;             // yarn (DeepSeek-style attention factor knobs)
  double attention_factor = 0.0;                         // yarn: explicit override; 0 → derived
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
};

// Precomputed inverse frequencies and the cos/sin magnitude (YaRN's attention factor).
class RopeTable {
 public:
  RopeTable() = default;
  explicit RopeTable(const RopeConfig& config);
  // A table over rotary_dim = 2 * inv_freq.size() with these frequencies, magnitude 1. A zero
  // frequency leaves its pair exactly as it is (cos 0 = 1, sin 0 = 0), so rotations whose frequencies
  // are split over several tables, one position array each (multimodal and 2-D RoPE), compose to the
  // rotation with each pair at its own position.
  static RopeTable from_inv_freq(std::vector<float> inv_freq);
  int rotary_dim() const { return rotary_dim_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }  // rotary_dim / 2 entries
  float magnitude() const { return magnitude_; }

 private:
  int rotary_dim_ = 0;
  std::vector<float> inv_freq_;
  float magnitude_ = 1.0f;
};

// In place on x: (n, heads, head_dim) f32. Token i is at position positions[i]. Non-interleaved
// ("rotate half") layout over the first rotary_dim dims: pairs (j, j + rotary_dim/2).
void rope(Tensor& x, std::span<const int32_t> positions, const RopeTable& table);
// The same, reading the positions from positions.device when it is set.
void rope(Tensor& x, const Positions& positions, const RopeTable& table);
// rope()'s checks of its arguments (ops that do its work check with them); returns x's device.
Device check_rope(const Tensor& x, size_t n_positions, const RopeTable& table);

}  // namespace sanctum::ops
