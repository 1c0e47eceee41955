// The LoRA / DoRA merge against a scalar double-precision reference at odd sizes (around the vector
// widths), plain and per-expert, dense f32 / bf16 and MLX affine 4 / 8-bit.
#include "weights/adapters/lora_merge.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/error.h"

namespace sanctum {
namespace {

struct Sizes {
  int64_t experts, out, in, rank;
};

LoraTarget random_target(Sizes s, uint32_t seed, bool dora = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.5f);
  LoraTarget t;
  const std::string module = "m";
  t.module = module;
  t.file = module == "m" ? std::string("adapters.safetensors") : module;
  t.a_name = module + ".lora_a";
  t.b_name = module + ".lora_b";
  t.experts = s.experts;
  t.out = s.out;
  t.in = s.in;
  t.rank = s.rank;
  t.scale = 1.75f;
  const int64_t e = std::max<int64_t>(s.experts, 1);
  t.a = s.experts ? Tensor::zeros({e, s.rank, s.in}, DType::f32) : Tensor::zeros({s.rank, s.in}, DType::f32);
  t.b = s.experts ? Tensor::zeros({e, s.out, s.rank}, DType::f32) : Tensor::zeros({s.out, s.rank}, DType::f32);
  for (int64_t i = 0; i < t.a.numel(); ++i) t.a.data<float>()[i] = n(rng);
  for (int64_t i = 0; i < t.b.numel(); ++i) t.b.data<float>()[i] = n(rng);
  if (dora) {
    t.magnitude = Tensor::zeros({s.out}, DType::f32);
    for (int64_t i = 0; i < s.out; ++i) t.magnitude.data<float>()[i] = 0.5f + std::abs(n(rng));
  }
  return t;
}

// scale * sum_k B[o][k] A[k][i] in double.
double ref_delta(const LoraTarget& t, int64_t e, int64_t o, int64_t i) {
  double s = 0;
  for (int64_t k = 0; k < t.rank; ++k)
    s += static_cast<double>(t.b.data<float>()[(e * t.out + o) * t.rank + k]) * t.a.data<float>()[(e * t.rank + k) * t.in + i];
  return t.scale * s;
}

Tensor random_weight(Sizes s, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Tensor w = s.experts ? Tensor::zeros({s.experts, s.out, s.in}, dtype) : Tensor::zeros({s.out, s.in}, dtype);
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float v = n(rng);
    if (dtype == DType::f32) w.data<float>()[i] = v;
    else w.data<uint16_t>()[i] = f32_to_bf16(v);
  }
  return w;
}

const Sizes kSizes[] = {{0, 1, 1, 1}, {0, 31, 33, 3}, {0, 33, 64, 16}, {0, 769, 31, 8}, {3, 17, 33, 4}};

TEST(LoraMerge, delta_rows_equal_the_scalar_reference) {
  for (const Sizes& s : kSizes) {
    const LoraTarget t = random_target(s, 1);
    std::vector<float> d(static_cast<size_t>(s.out * s.in));
    for (int64_t e = 0; e < std::max<int64_t>(s.experts, 1); ++e) {
      lora_delta_rows(t, e, 0, s.out, d.data());
      for (int64_t o = 0; o < s.out; ++o)
        for (int64_t i = 0; i < s.in; ++i)
          ASSERT_NEAR(d[static_cast<size_t>(o * s.in + i)], ref_delta(t, e, o, i), 1e-5 * (1 + std::abs(ref_delta(t, e, o, i))))
              << s.out << "x" << s.in << " r" << s.rank << " e" << e;
    }
  }
}

TEST(LoraMerge, dense_f32_is_w_plus_scaled_ba) {
  for (const Sizes& s : kSizes) {
    const LoraTarget t = random_target(s, 2);
    const Tensor w = random_weight(s, DType::f32, 3);
    const Tensor m = merge_dense(w, t, "w");
    ASSERT_EQ(m.dtype(), DType::f32);
    const int64_t e_count = std::max<int64_t>(s.experts, 1);
    for (int64_t e = 0; e < e_count; ++e)
      for (int64_t o = 0; o < s.out; ++o)
        for (int64_t i = 0; i < s.in; ++i) {
          const int64_t at = (e * s.out + o) * s.in + i;
          const double want = w.data<float>()[at] + ref_delta(t, e, o, i);
          ASSERT_NEAR(m.data<float>()[at], want, 1e-5 * (1 + std::abs(want)));
        }
  }
}

TEST(LoraMerge, dense_bf16_rounds_delta_then_sum_like_mlx_lm_fuse) {
  const Sizes s{0, 33, 65, 5};
  const LoraTarget t = random_target(s, 4);
  const Tensor w = random_weight(s, DType::bf16, 5);
  const Tensor m = merge_dense(w, t, "w");
  ASSERT_EQ(m.dtype(), DType::bf16);
  int differ = 0;
  for (int64_t o = 0; o < s.out; ++o)
    for (int64_t i = 0; i < s.in; ++i) {
      const int64_t at = o * s.in + i;
      const float delta = bf16_to_f32(f32_to_bf16(static_cast<float>(ref_delta(t, 0, o, i))));
      const uint16_t want = f32_to_bf16(bf16_to_f32(w.data<uint16_t>()[at]) + delta);
      // The f32 sum of B A may land on the other side of a bf16 rounding boundary: one ulp, rarely.
      const int gap = std::abs(static_cast<int>(m.data<uint16_t>()[at]) - static_cast<int>(want));
      ASSERT_LE(gap, 1);
      differ += gap;
    }
  EXPECT_LE(differ, s.out * s.in / 100);
}

TEST(LoraMerge, dora_rows_take_the_magnitude_as_their_norm) {
  const Sizes s{0, 31, 47, 4};
  const LoraTarget t = random_target(s, 6, true);
  const Tensor m = merge_dense(random_weight(s, DType::f32, 7), t, "w");
  for (int64_t o = 0; o < s.out; ++o) {
    double ss = 0;
    for (int64_t i = 0; i < s.in; ++i) ss += std::pow(m.data<float>()[o * s.in + i], 2);
    EXPECT_NEAR(std::sqrt(ss), t.magnitude.data<float>()[o], 1e-4);
  }
}

TEST(LoraMerge, wrong_shape_names_the_adapter_tensors) {
  const LoraTarget t = random_target({0, 8, 16, 2}, 8);
  try {
    merge_dense(random_weight({0, 8, 32, 2}, DType::f32, 9), t, "model.safetensors: tensor 'x.weight'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("x.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("adapters.safetensors tensors 'm.lora_a' / 'm.lora_b'"), std::string::npos) << msg;
  }
}

// dequantize(quantize(x)) stays within 1.5 steps of x (mlx makes the larger-magnitude edge exact, which
// may clip the other edge by a code), and that edge is the bias.
TEST(AffineQuantize, codes_reconstruct_within_half_a_step) {
  std::mt19937 rng(10);
  std::normal_distribution<float> n(0.0f, 0.3f);
  for (int bits : {4, 8})
    for (int g : {32, 64, 128}) {
      const int64_t cols = 2 * g;
      std::vector<float> x(static_cast<size_t>(cols)), back(static_cast<size_t>(cols));
      for (float& v : x) v = n(rng);
      std::vector<uint32_t> packed(static_cast<size_t>(cols * bits / 32));
      std::vector<float> scales(2), biases(2);
      affine_quantize_row(x.data(), cols, bits, g, packed.data(), scales.data(), biases.data());
      affine_dequantize_row(packed.data(), scales.data(), biases.data(), DType::f32, cols, bits, g, back.data());
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_LE(std::abs(back[c] - x[c]), 1.5f * std::abs(scales[c / g]) + 1e-6f) << bits << "/" << g << " col " << c;
      for (int grp = 0; grp < 2; ++grp) {
        float lo = x[grp * g], hi = lo;
        for (int j = 0; j < g; ++j) lo = std::min(lo, x[grp * g + j]), hi = std::max(hi, x[grp * g + j]);
        EXPECT_FLOAT_EQ(biases[grp], std::abs(lo) > std::abs(hi) ? lo : hi);
      }
    }
}

// Codes, scales and biases mlx.core.quantize (mlx 0.32.4) gives for one f32 row of 128 values
// x[i] = ((37 i mod 101) - 50) / 128 (+ 0.25 for the first 5 of every 64): a golden made with
//   mx.quantize(mx.array(x)[None], group_size=G, bits=B)
TEST(AffineQuantize, codes_scales_and_biases_equal_mlx_quantize) {
  struct Golden {
    int bits, group;
    std::vector<uint32_t> codes;
    std::vector<float> scales, biases;
  };
  const Golden goldens[] = {
      {4,
       32,
       {2083819611u, 2370434738u, 2656704451u, 2708154580u, 2977774068u, 3532540661u, 3818871559u, 4104154152u, 4156573974u, 1221959274u,
        1238806395u, 1525068684u, 3322564499u, 3053010306u, 2766679136u, 2211912543u},
       {-0.0546875f, -0.0478515625f, -0.0642361119389534f, 0.048828125f},
       {0.4375f, 0.3828125f, 0.578125f, -0.390625f}},
      {8,
       64,
       {2634046389u, 2027042370u, 4234131997u, 2313439137u, 376556334u,  2599770291u, 662887488u,  2869914052u,
        949218641u,  3156245205u, 1235549794u, 3459353574u, 1538594931u, 3745684983u, 1824926340u, 4032015889u,
        1285035361u, 4252615936u, 2632476081u, 1015600208u, 2868278207u, 1251402334u, 3107291597u, 1487204461u,
        3343159516u, 1739849595u, 3595738858u, 1975598730u, 3831606777u, 2211400856u, 4067408695u, 2464045734u},
       {-0.0031934306025505066f, -0.0038034538738429546f},
       {0.4375f, 0.578125f}},
      {4,
       128,
       {2371199611u, 2657810356u, 2927311044u, 3011267029u, 3297597926u, 3315493623u, 3584981816u, 3870526537u, 4156573974u, 1221959274u,
        1238806395u, 1525068684u, 1811399837u, 2068370846u, 2353653423u, 2639980467u},
       {-0.0642361119389534f},
       {0.578125f}},
  };
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) x[i] = static_cast<float>(((i * 37) % 101) - 50) / 128.0f + (i % 64 < 5 ? 0.25f : 0.0f);
  for (const Golden& g : goldens) {
    std::vector<uint32_t> codes(g.codes.size());
    std::vector<float> scales(g.scales.size()), biases(g.biases.size());
    affine_quantize_row(x.data(), 128, g.bits, g.group, codes.data(), scales.data(), biases.data());
    EXPECT_EQ(codes, g.codes) << g.bits << "-bit g" << g.group;
    EXPECT_EQ(scales, g.scales) << g.bits << "-bit g" << g.group;
    EXPECT_EQ(biases, g.biases) << g.bits << "-bit g" << g.group;
  }
}

TEST(LoraMerge, quantized_merge_requantizes_the_sum_with_the_same_bits_and_group) {
  const Sizes s{2, 17, 128, 3};
  const int bits = 4, g = 64;
  const LoraTarget t = random_target(s, 11);
  // A quantized weight from random values.
  std::mt19937 rng(12);
  std::normal_distribution<float> n(0.0f, 1.0f);
  QuantizedWeight q{Tensor::zeros({2, 17, 128 * bits / 32}, DType::u32), Tensor::zeros({2, 17, 2}, DType::bf16),
                    Tensor::zeros({2, 17, 2}, DType::bf16)};
  std::vector<float> row(128), sc(2), bi(2);
  for (int64_t r = 0; r < 34; ++r) {
    for (float& v : row) v = n(rng);
    affine_quantize_row(row.data(), 128, bits, g, q.data.data<uint32_t>() + r * 16, sc.data(), bi.data());
    for (int k = 0; k < 2; ++k) {
      q.scales.data<uint16_t>()[r * 2 + k] = f32_to_bf16(sc[k]);
      q.biases.data<uint16_t>()[r * 2 + k] = f32_to_bf16(bi[k]);
    }
  }
  const QuantizedWeight m = merge_quantized(q, bits, g, t, "w");
  ASSERT_EQ(m.scales.dtype(), DType::bf16);
  std::vector<float> before(128), after(128);
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t o = 0; o < 17; ++o) {
      const int64_t r = e * 17 + o;
      affine_dequantize_row(q.data.data<uint32_t>() + r * 16, q.scales.data<uint16_t>() + r * 2, q.biases.data<uint16_t>() + r * 2,
                            DType::bf16, 128, bits, g, before.data());
      affine_dequantize_row(m.data.data<uint32_t>() + r * 16, m.scales.data<uint16_t>() + r * 2, m.biases.data<uint16_t>() + r * 2,
                            DType::bf16, 128, bits, g, after.data());
      for (int64_t i = 0; i < 128; ++i) {
        const double want = before[i] + ref_delta(t, e, o, i);
        const double step = std::abs(bf16_to_f32(m.scales.data<uint16_t>()[r * 2 + i / g]));
        ASSERT_LE(std::abs(after[i] - want), 1.5 * step + 0.02 * (1 + std::abs(want))) << "expert " << e << " row " << o << " col " << i;
      }
    }
}

}  // namespace
}  // namespace sanctum
