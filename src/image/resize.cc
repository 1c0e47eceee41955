#include "image/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/thread_pool.h"

namespace sanctum::image {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's weights: 22 fractional bits

double bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// One output position's taps: input [first, first + count) with fixed-point weights.
struct Taps {
  int64_t ksize = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;  // (out_size, ksize)
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc, same operations in the same order.
Taps make_taps(int64_t in_size, int64_t out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filter_scale = scale < 1.0 ? 1.0 : scale;
  const double support = 2.0 * filter_scale;
  Taps t;
  t.ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.weights.assign(out_size * t.ksize, 0);
  std::vector<double> k(t.ksize);
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filter_scale;
    int64_t xmin = static_cast<int64_t>(center - support + 0.5);  // truncation toward zero, as C's (int)
    if (xmin < 0) xmin = 0;
    int64_t xmax = static_cast<int64_t>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      const double w = bicubic((static_cast<double>(x + xmin) - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (int64_t x = 0; x < xmax; ++x) {
      double v = ww != 0.0 ? k[x] / ww : k[x];
      t.weights[xx * t.ksize + x] = static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    t.first[xx] = xmin;
    t.count[xx] = xmax;
  }
  return t;
}

uint8_t clip8(int64_t v) {
  if (v >= (int64_t{1} << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

template <class F>
void for_rows(ThreadPool* pool, int64_t n, F&& fn) {
  if (pool) pool->parallel_for(n, 8, fn);
  else fn(int64_t{0}, n);
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& in, int64_t out_w, int64_t out_h, ThreadPool* pool) {
  if (out_w == in.width && out_h == in.height) return in;  // PIL returns a copy
  const bool horizontal = out_w != in.width, vertical = out_h != in.height;
  const Taps tv = make_taps(in.height, out_h);
  // Rows the vertical pass reads: the horizontal pass computes only those.
  const int64_t row0 = tv.first[0], row_end = tv.first[out_h - 1] + tv.count[out_h - 1];

  RgbImage mid;
  const RgbImage* src = &in;
  int64_t src_row0 = 0;
  if (horizontal) {
    const Taps th = make_taps(in.width, out_w);
    mid.width = out_w;
    mid.height = row_end - row0;
    mid.pixels.resize(static_cast<size_t>(mid.width * mid.height * 3));
    for_rows(pool, mid.height, [&](int64_t y0, int64_t y1) {
      for (int64_t y = y0; y < y1; ++y) {
        const uint8_t* row = in.pixels.data() + (row0 + y) * in.width * 3;
        uint8_t* out = mid.pixels.data() + y * out_w * 3;
        for (int64_t xx = 0; xx < out_w; ++xx) {
          const int32_t* k = th.weights.data() + xx * th.ksize;
          const uint8_t* p = row + th.first[xx] * 3;
          int64_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
          for (int64_t x = 0; x < th.count[xx]; ++x) {
            s0 += int64_t{p[3 * x]} * k[x];
            s1 += int64_t{p[3 * x + 1]} * k[x];
            s2 += int64_t{p[3 * x + 2]} * k[x];
          }
          out[3 * xx] = clip8(s0), out[3 * xx + 1] = clip8(s1), out[3 * xx + 2] = clip8(s2);
        }
      }
    });
    src = &mid;
    src_row0 = row0;
  }
  if (!vertical) return horizontal ? mid : in;

  RgbImage out{src->width, out_h, std::vector<uint8_t>(static_cast<size_t>(src->width * out_h * 3))};
  const int64_t row_len = src->width * 3;
  for_rows(pool, out_h, [&](int64_t y0, int64_t y1) {
    std::vector<int64_t> acc(static_cast<size_t>(row_len));
    for (int64_t yy = y0; yy < y1; ++yy) {
      const int32_t* k = tv.weights.data() + yy * tv.ksize;
      std::fill(acc.begin(), acc.end(), int64_t{1} << (kPrecisionBits - 1));
      for (int64_t y = 0; y < tv.count[yy]; ++y) {
        const uint8_t* row = src->pixels.data() + (tv.first[yy] + y - src_row0) * row_len;
        const int64_t w = k[y];
        for (int64_t i = 0; i < row_len; ++i) acc[i] += row[i] * w;
      }
      uint8_t* dst = out.pixels.data() + yy * row_len;
      for (int64_t i = 0; i < row_len; ++i) dst[i] = clip8(acc[i]);
    }
  });
  return out;
}

}  // namespace sanctum::image
