#include "image/preprocess.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/thread_pool.h"
#include "image/resize.h"

namespace sanctum::image {

std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels) {
  const double h = static_cast<double>(height), w = static_cast<double>(width), f = static_cast<double>(factor);
  if (std::max(h, w) / std::min(h, w) > 200)
    fail(ErrorKind::invalid_argument, "the image is " + std::to_string(width) + "x" + std::to_string(height) +
                                          ": its aspect ratio is over 200, which the model's processor refuses; crop or pad it");
  // Python's round() is round-half-even, as nearbyint in the default rounding mode.
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

std::array<uint8_t, 32> content_hash(const RgbImage& image) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  uint8_t size[8];
  for (int i = 0; i < 4; ++i) {
    size[i] = static_cast<uint8_t>(static_cast<uint64_t>(image.width) >> (8 * i));
    size[4 + i] = static_cast<uint8_t>(static_cast<uint64_t>(image.height) >> (8 * i));
  }
  std::array<uint8_t, 32> out{};
  unsigned int n = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 || EVP_DigestUpdate(ctx.get(), size, sizeof size) != 1 ||
      EVP_DigestUpdate(ctx.get(), image.pixels.data(), image.pixels.size()) != 1 || EVP_DigestFinal_ex(ctx.get(), out.data(), &n) != 1)
    fail(ErrorKind::internal, "[image] SHA-256 through OpenSSL failed");
  return out;
}

PreparedImage prepare_image(const RgbImage& image, const ProcessorConfig& cfg, ThreadPool* pool) {
  const int64_t p = cfg.patch_size, m = cfg.merge_size, t = cfg.temporal_patch_size;
  RgbImage resized;
  const RgbImage* src = &image;
  if (cfg.do_resize) {
    auto [h, w] = smart_resize(image.height, image.width, cfg.factor(), cfg.min_pixels, cfg.max_pixels);
    resized = resize_bicubic(image, w, h, pool);
    src = &resized;
  }
  if (src->height % (p * m) != 0 || src->width % (p * m) != 0)
    fail(ErrorKind::invalid_argument, "the image is " + std::to_string(src->width) + "x" + std::to_string(src->height) +
                                          ", not a multiple of patch_size * merge_size (" + std::to_string(p * m) +
                                          ") with do_resize off; resize it first");

  // Every output value comes from one uint8, so the f32 arithmetic is a table: rescale in f64 then
  // cast (transformers' rescale), normalize in f32 (its normalize).
  float lut[3][256];
  for (int c = 0; c < 3; ++c) {
    const float mean = static_cast<float>(cfg.image_mean[c]), std_dev = static_cast<float>(cfg.image_std[c]);
    for (int u = 0; u < 256; ++u) {
      float v = cfg.do_rescale ? static_cast<float>(static_cast<double>(u) * cfg.rescale_factor) : static_cast<float>(u);
      lut[c][u] = cfg.do_normalize ? (v - mean) / std_dev : v;
    }
  }

  PreparedImage out;
  const int64_t gh = src->height / p, gw = src->width / p;
  out.grid_thw = {1, gh, gw};
  out.merge_size = m;
  out.rows = gh * gw;
  out.cols = 3 * t * p * p;
  out.pixel_values.resize(static_cast<size_t>(out.rows * out.cols));
  out.content_hash = content_hash(image);
  const int64_t width = src->width;
  const uint8_t* px = src->pixels.data();
  // Row r = ((bh * gw/m + bw) * m + mh) * m + mw holds patch (bh*m + mh, bw*m + mw); its columns run
  // (channel, temporal copy, y, x).
  auto fill = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t mw = r % m, mh = (r / m) % m, block = r / (m * m);
      const int64_t bw = block % (gw / m), bh = block / (gw / m);
      const int64_t y0 = (bh * m + mh) * p, x0 = (bw * m + mw) * p;
      float* dst = out.pixel_values.data() + r * out.cols;
      for (int c = 0; c < 3; ++c) {
        float* first = dst + c * t * p * p;
        for (int64_t y = 0; y < p; ++y)
          for (int64_t x = 0; x < p; ++x) first[y * p + x] = lut[c][px[((y0 + y) * width + x0 + x) * 3 + c]];
        for (int64_t k = 1; k < t; ++k) std::copy(first, first + p * p, first + k * p * p);
      }
    }
  };
  if (pool) pool->parallel_for(out.rows, 64, fill);
  else fill(0, out.rows);
  return out;
}

}  // namespace sanctum::image
