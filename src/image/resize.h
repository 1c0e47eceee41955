#pragma once
// PIL's Image.resize(..., BICUBIC) on 8-bit RGB, bit for bit: a separable convolution whose support
// widens with the downscale factor, 22-bit fixed-point weights, the horizontal pass first, each pass
// rounded and clipped to uint8.
#include <cstdint>

#include "image/decode.h"

namespace sanctum {
class ThreadPool;
}

namespace sanctum::image {

// pool may be null (one thread).
RgbImage resize_bicubic(const RgbImage& in, int64_t out_width, int64_t out_height, ThreadPool* pool = nullptr);

}  // namespace sanctum::image
