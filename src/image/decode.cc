#include "image/decode.h"

#include <cstring>
#include <string>

#include "base/error.h"
#include "image/codecs.h"

namespace sanctum::image {

const char* format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::png: return "PNG";
    case ImageFormat::jpeg: return "JPEG";
    case ImageFormat::webp: return "WebP";
    case ImageFormat::gif: return "GIF";
    case ImageFormat::unknown: break;
  }
  return "unknown";
}

ImageFormat sniff_format(std::string_view b) {
  auto starts = [&](std::string_view magic, size_t at = 0) { return b.size() >= at + magic.size() && b.substr(at, magic.size()) == magic; };
  if (starts("\x89PNG\r\n\x1a\n")) return ImageFormat::png;
  if (starts("\xff\xd8\xff")) return ImageFormat::jpeg;
  if (starts("RIFF") && starts("WEBP", 8)) return ImageFormat::webp;
  if (starts("GIF87a") || starts("GIF89a")) return ImageFormat::gif;
  return ImageFormat::unknown;
}

RgbImage decode_image(std::string_view bytes, const DecodeLimits& limits) {
  if (bytes.size() > limits.max_encoded_bytes)
    fail(ErrorKind::invalid_argument, "the image is " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                                          std::to_string(limits.max_encoded_bytes) + "; send a smaller image");
  switch (sniff_format(bytes)) {
    case ImageFormat::png: return detail::decode_png(bytes, limits);
    case ImageFormat::jpeg: return detail::decode_jpeg(bytes, limits);
    case ImageFormat::webp: return detail::decode_webp(bytes, limits);
    case ImageFormat::gif: return detail::decode_gif(bytes, limits);
    case ImageFormat::unknown: break;
  }
  fail(ErrorKind::invalid_input, "the image data is not PNG, JPEG, WebP or GIF (unrecognized leading bytes)");
}

namespace detail {

void check_size(const char* format, int64_t width, int64_t height, const DecodeLimits& limits) {
  if (width <= 0 || height <= 0) corrupt(format, "it declares an empty size");
  // Divided, not multiplied: a header's sides may reach 2^32 - 1 each.
  if (width > limits.max_pixels / height)
    fail(ErrorKind::invalid_argument, std::string("the ") + format + " image is " + std::to_string(width) + "x" + std::to_string(height) +
                                          " pixels, over the --max-image-pixels limit of " + std::to_string(limits.max_pixels) +
                                          "; send a smaller image");
}

void corrupt(const char* format, const std::string& why) {
  fail(ErrorKind::invalid_input, std::string("the ") + format + " image is corrupt or truncated: " + why);
}

uint8_t over_white(uint8_t value, uint8_t alpha) {
  // Pillow's AlphaComposite.c with an opaque destination: 7 extra bits of precision, rounded /255.
  constexpr uint32_t kBits = 7;
  const uint32_t a = alpha;
  const uint32_t out_a255 = a * 255 + 255 * (255 - a);
  const uint32_t coef1 = a * 255 * 255 * (1u << kBits) / out_a255;
  const uint32_t coef2 = 255 * (1u << kBits) - coef1;
  const uint32_t t = value * coef1 + 255 * coef2 + (0x80u << kBits);
  return static_cast<uint8_t>((((t >> 8) + t) >> 8) >> kBits);
}

void rgba_to_rgb(const uint8_t* rgba, uint8_t* rgb, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t a = rgba[4 * i + 3];
    for (int c = 0; c < 3; ++c) rgb[3 * i + c] = a == 255 ? rgba[4 * i + c] : over_white(rgba[4 * i + c], a);
  }
}

}  // namespace detail
}  // namespace sanctum::image
