#include "ops/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

namespace {
constexpr const char* kOp = "rope";

// YaRN as mlx-lm's YarnRoPE computes it (mlx_lm/models/rope_utils.py); transformers'
// _compute_yarn_parameters gives the same frequencies (its inv_freq is the reciprocal of mlx's
// blended period). Where the two differ, this follows mlx-lm, see the comments below.
void yarn_inv_freq(const RopeConfig& c, int dims, std::vector<float>& inv_freq, float& magnitude) {
  const double base = c.theta, factor = c.factor;
  const double original = c.original_max_position > 0 ? c.original_max_position : 4096;  // mlx-lm default
  auto correction_dim = [&](double rotations) {
    return dims * std::log(original / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
  };
  // mlx-lm always floors/ceils the range (transformers' `truncate`, default true, may turn this off).
  double low = std::max(std::floor(correction_dim(c.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(c.beta_slow)), static_cast<double>(dims - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  const int half = dims / 2;
  inv_freq.resize(static_cast<size_t>(half));
  for (int j = 0; j < half; ++j) {
    const double ramp = std::clamp((j - low) / (high - low), 0.0, 1.0);
    const double extrapolate = 1.0 - ramp;  // weight of the unscaled frequency
    const double inv_extra = std::pow(base, -2.0 * j / dims);
    const double inv_inter = inv_extra / factor;
    inv_freq[static_cast<size_t>(j)] = static_cast<float>(inv_inter * (1.0 - extrapolate) + inv_extra * extrapolate);
  }
  auto get_mscale = [&](double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
  // mlx-lm: mscale(factor, mscale) / mscale(factor, mscale_all_dim), with mscale_all_dim = 0 giving 1.
  // transformers ignores `mscale` unless mscale_all_dim is also set; mlx-lm does not, and we follow it.
  // An explicit attention_factor (transformers only; mlx-lm has no such key) wins when set.
  if (c.attention_factor > 0.0) magnitude = static_cast<float>(c.attention_factor);
  else magnitude = static_cast<float>(get_mscale(c.mscale) / get_mscale(c.mscale_all_dim));
}
}  // namespace

RopeTable::RopeTable(const RopeConfig& c) {
  SANCTUM_REQUIRE(c.head_dim > 0, kOp, "head_dim must be positive, got " + std::to_string(c.head_dim));
  const int dims = c.rotary_dim > 0 ? c.rotary_dim : c.head_dim;
  SANCTUM_REQUIRE(dims % 2 == 0 && dims <= c.head_dim, kOp,
                  "rotary_dim " + std::to_string(dims) + " must be even and at most head_dim " + std::to_string(c.head_dim));
  SANCTUM_REQUIRE(c.theta > 0.0, kOp, "theta must be positive");
  rotary_dim_ = dims;
  const int half = dims / 2;
  inv_freq_.resize(static_cast<size_t>(half));
  for (int j = 0; j < half; ++j) inv_freq_[static_cast<size_t>(j)] = static_cast<float>(std::pow(c.theta, -2.0 * j / dims));
  switch (c.type) {
    case RopeConfig::Type::standard: break;
    case RopeConfig::Type::linear:
      // mlx nn.RoPE(scale = 1/factor) scales positions; folding it into the frequencies is the same angle.
      SANCTUM_REQUIRE(c.factor > 0.0, kOp, "linear scaling needs factor > 0");
      for (float& f : inv_freq_) f = static_cast<float>(f / c.factor);
      break;
    case RopeConfig::Type::llama3: {
      SANCTUM_REQUIRE(c.factor > 0.0 && c.high_freq_factor != c.low_freq_factor, kOp,
                      "llama3 scaling needs factor > 0 and high_freq_factor != low_freq_factor");
      const double old_len = c.original_max_position > 0 ? c.original_max_position : 8192;  // mlx-lm default
      const double low_wavelen = old_len / c.low_freq_factor, high_wavelen = old_len / c.high_freq_factor;
      for (int j = 0; j < half; ++j) {
        const double period = std::pow(c.theta, 2.0 * j / dims);  // mlx "freqs"
        const double wavelen = 2.0 * std::numbers::pi * period;
        double p = wavelen > low_wavelen ? period * c.factor : period;
        if (wavelen > high_wavelen && wavelen < low_wavelen) {
          const double smooth = (old_len / wavelen - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor);
          p = p / ((1.0 - smooth) / c.factor + smooth);
        }
        inv_freq_[static_cast<size_t>(j)] = static_cast<float>(1.0 / p);
      }
      break;
    }
    case RopeConfig::Type::yarn:
      SANCTUM_REQUIRE(c.factor > 0.0, kOp, "yarn scaling needs factor > 0");
      yarn_inv_freq(c, dims, inv_freq_, magnitude_);
      break;
  }
}

RopeTable RopeTable::from_inv_freq(std::vector<float> inv_freq) {
  SANCTUM_REQUIRE(!inv_freq.empty(), kOp, "from_inv_freq needs at least one frequency");
  RopeTable t;
  t.rotary_dim_ = static_cast<int>(2 * inv_freq.size());
  t.inv_freq_ = std::move(inv_freq);
  return t;
}

Device check_rope(const Tensor& x, size_t n_positions, const RopeTable& table) {
  detail::require_defined(kOp, "x", x);
  const Device device = detail::require_one_device(kOp, {{"x", &x}});
  detail::require_dtype(kOp, "x", x, DType::f32);
  SANCTUM_REQUIRE(x.ndim() == 3, kOp, "x must be 3-D (tokens, heads, head_dim), got " + x.shape_string());
  detail::require_inner_contiguous(kOp, "x", x);
  SANCTUM_REQUIRE(table.rotary_dim() > 0, kOp, "the RopeTable is empty (build it from a RopeConfig)");
  SANCTUM_REQUIRE(table.rotary_dim() <= x.dim(2), kOp,
                  "rotary_dim " + std::to_string(table.rotary_dim()) + " exceeds head_dim " + std::to_string(x.dim(2)));
  SANCTUM_REQUIRE(static_cast<int64_t>(n_positions) == x.dim(0), kOp,
                  std::to_string(n_positions) + " positions for " + std::to_string(x.dim(0)) + " tokens");
  return device;
}

void rope(Tensor& x, std::span<const int32_t> positions, const RopeTable& table) {
  const Device device = check_rope(x, positions.size(), table);
  if (device == Device::cuda) return cuda::rope(x, positions, nullptr, table);
  cpu::rope(x, positions, table);
}

void rope(Tensor& x, const Positions& positions, const RopeTable& table) {
  if (positions.device == nullptr) return rope(x, positions.host, table);
  const Device device = check_rope(x, positions.host.size(), table);
  detail::require_device_positions(kOp, positions, device);
  if (device == Device::cuda) return cuda::rope(x, positions.host, positions.device->data<int32_t>(), table);
  cpu::rope(x, {positions.device->data<int32_t>(), positions.host.size()}, table);
}

}  // namespace sanctum::ops
