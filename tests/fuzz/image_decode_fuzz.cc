// libFuzzer target for the image decoders (PNG, JPEG, WebP, GIF) and the preprocessing behind them:
// any bytes either decode to an image within the limits, which then preprocesses into a tensor of the
// announced shape, or throw sanctum::Error. A crash, a leak or a libpng/libjpeg longjmp gone wrong is
// a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "base/error.h"
#include "image/decode.h"
#include "image/preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sanctum::image;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  DecodeLimits limits;
  limits.max_pixels = 1 << 20;  // small enough that every run stays fast
  // A small budget so each decoded image also runs the resize and patchify quickly.
  ProcessorConfig config;
  config.patch_size = 2;
  config.merge_size = 2;
  config.min_pixels = 16;
  config.max_pixels = 4096;
  try {
    RgbImage im = decode_image(bytes, limits);
    if (im.width <= 0 || im.height <= 0 || im.width * im.height > limits.max_pixels ||
        im.pixels.size() != static_cast<size_t>(im.width * im.height * 3))
      std::abort();
    PreparedImage p = prepare_image(im, config);
    if (p.rows != p.grid_thw[0] * p.grid_thw[1] * p.grid_thw[2] || p.pixel_values.size() != static_cast<size_t>(p.rows * p.cols) ||
        p.token_count() * 4 != p.rows)
      std::abort();
  } catch (const sanctum::Error&) {
  }
  return 0;
}
