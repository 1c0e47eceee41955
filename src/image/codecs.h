#pragma once
// The per-format decoders behind decode_image (image/decode.h); internal to src/image.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "image/decode.h"

namespace sanctum::image::detail {

RgbImage decode_png(std::string_view bytes, const DecodeLimits& limits);
RgbImage decode_jpeg(std::string_view bytes, const DecodeLimits& limits);
RgbImage decode_webp(std::string_view bytes, const DecodeLimits& limits);
RgbImage decode_gif(std::string_view bytes, const DecodeLimits& limits);

// Throws the --max-image-pixels error when width * height is over the limit, and rejects empty sizes.
void check_size(const char* format, int64_t width, int64_t height, const DecodeLimits& limits);
[[noreturn]] void corrupt(const char* format, const std::string& why);

// PIL's alpha_composite of one RGBA pixel onto opaque white, then RGB (exact integer formula).
uint8_t over_white(uint8_t value, uint8_t alpha);
// (n, 4) RGBA -> (n, 3) RGB composited onto white.
void rgba_to_rgb(const uint8_t* rgba, uint8_t* rgb, int64_t n);

}  // namespace sanctum::image::detail
