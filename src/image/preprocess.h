#pragma once
// Decoded RGB -> PreparedImage exactly as transformers' Qwen2-VL image processor (the PIL one,
// Qwen2VLImageProcessorPil) computes it: smart resize to multiples of patch * merge within the pixel
// bounds, PIL bicubic, rescale and normalize in f32, the still image repeated over the temporal
// patch, patchified in the processor's order.
#include <cstdint>
#include <utility>

#include "image/decode.h"
#include "image/prepared_image.h"
#include "image/processor_config.h"

namespace sanctum {
class ThreadPool;
}

namespace sanctum::image {

// (height, width) after the processor's smart_resize; Error(invalid_argument) past an aspect ratio of 200.
std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels);

// SHA-256 over width and height (4-byte little-endian each) then the RGB bytes.
std::array<uint8_t, 32> content_hash(const RgbImage& image);

// pool may be null (one thread).
PreparedImage prepare_image(const RgbImage& image, const ProcessorConfig& config, ThreadPool* pool = nullptr);

}  // namespace sanctum::image
