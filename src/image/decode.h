#pragma once
// Encoded image bytes -> 8-bit RGB, the way transformers' processors see an image: PIL's
// Image.open(...) then the processor's convert_to_rgb (transparency composited onto white, then RGB).
// The format comes from the magic bytes, never from a declared media type. Every limit is checked
// before the pixels are allocated; malformed or truncated input throws Error(invalid_input), a
// limit throws Error(invalid_argument) naming its flag.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sanctum::image {

// 2^24 pixels (4096 x 4096, 48 MiB as RGB): the Qwen3-VL / Qwen3.5 processors' own upper bound
// (size.longest_edge = 16777216), so anything they would keep at full resolution is accepted.
inline constexpr int64_t kDefaultMaxImagePixels = int64_t{1} << 24;
// 20 MiB of encoded bytes per image, the figure the public chat APIs use.
inline constexpr size_t kDefaultMaxImageBytes = size_t{20} << 20;

struct DecodeLimits {
  int64_t max_pixels = kDefaultMaxImagePixels;       // --max-image-pixels: declared width * height
  size_t max_encoded_bytes = kDefaultMaxImageBytes;  // before base64
};

enum class ImageFormat { unknown, png, jpeg, webp, gif };

const char* format_name(ImageFormat f);
ImageFormat sniff_format(std::string_view bytes);

struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // (height, width, 3)
};

RgbImage decode_image(std::string_view bytes, const DecodeLimits& limits = {});

}  // namespace sanctum::image
