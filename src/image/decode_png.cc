// PNG through libpng. libpng reports errors by longjmp, so each step that can fail runs in a function
// whose frame holds no object with a destructor; the C++ side allocates around them.
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "image/codecs.h"

namespace sanctum::image::detail {
namespace {

struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char error[256];
};

void read_bytes(png_structp png, png_bytep out, size_t n) {
  auto* s = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > s->size - s->pos) png_error(png, "the data ends early");
  std::memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

void on_error(png_structp png, png_const_charp message) {
  auto* s = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(s->error, sizeof s->error, "%s", message);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

struct PngLayout {
  uint32_t width;
  uint32_t height;
  int channels;   // 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
  int bit_depth;  // 8, or 16 for 16-bit gray (PIL clips that to 255 rather than scaling)
  size_t row_bytes;
};

bool read_header(png_structp png, png_infop info, PngLayout* out) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  // PIL's modes: palette and tRNS become alpha, sub-byte gray scales to 0..255, 16-bit colour keeps
  // its high byte; 16-bit gray ("I;16") is left at 16 bits and clipped below.
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (depth == 16 && color != PNG_COLOR_TYPE_GRAY) png_set_strip_16(png);
  if (depth == 16 && color == PNG_COLOR_TYPE_GRAY) png_set_swap(png);  // host order (little-endian)
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out->width = png_get_image_width(png, info);
  out->height = png_get_image_height(png, info);
  out->channels = png_get_channels(png, info);
  out->bit_depth = png_get_bit_depth(png, info);
  out->row_bytes = png_get_rowbytes(png, info);
  return true;
}

bool read_rows(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

struct PngHandles {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngHandles() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

}  // namespace

RgbImage decode_png(std::string_view bytes, const DecodeLimits& limits) {
  // The limit comes before libpng reads further: IHDR is the first chunk (width, height big-endian at 16).
  if (bytes.size() < 24 || bytes.substr(12, 4) != "IHDR") corrupt("PNG", "the IHDR chunk is missing");
  auto be32 = [&](size_t at) {
    const auto* b = reinterpret_cast<const uint8_t*>(bytes.data()) + at;
    return int64_t{b[0]} << 24 | int64_t{b[1]} << 16 | int64_t{b[2]} << 8 | int64_t{b[3]};
  };
  check_size("PNG", be32(16), be32(20), limits);
  PngSource source{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0, {}};
  PngHandles h;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &source, on_error, on_warning);
  if (!h.png || !(h.info = png_create_info_struct(h.png))) corrupt("PNG", "libpng could not start");
  png_set_read_fn(h.png, &source, read_bytes);
  PngLayout layout{};
  if (!read_header(h.png, h.info, &layout)) corrupt("PNG", source.error);
  check_size("PNG", layout.width, layout.height, limits);

  const int64_t n = int64_t{layout.width} * layout.height;
  std::vector<uint8_t> raw(layout.row_bytes * layout.height);
  std::vector<png_bytep> rows(layout.height);
  for (uint32_t y = 0; y < layout.height; ++y) rows[y] = raw.data() + y * layout.row_bytes;
  if (!read_rows(h.png, rows.data())) corrupt("PNG", source.error);

  RgbImage out{layout.width, layout.height, std::vector<uint8_t>(static_cast<size_t>(n) * 3)};
  uint8_t* rgb = out.pixels.data();
  if (layout.bit_depth == 16) {
    // 16-bit gray (+ alpha from tRNS): PIL's I;16 -> L clips at 255; the alpha keeps its high byte.
    const int ch = layout.channels;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t v, a = 0xffff;
      std::memcpy(&v, raw.data() + 2 * (ch * i), 2);
      if (ch == 2) std::memcpy(&a, raw.data() + 2 * (ch * i + 1), 2);
      const uint8_t g = static_cast<uint8_t>(std::min<uint16_t>(v, 255));
      const uint8_t c = ch == 2 ? over_white(g, static_cast<uint8_t>(a >> 8)) : g;
      rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = c;
    }
    return out;
  }
  switch (layout.channels) {
    case 1:
      for (int64_t i = 0; i < n; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = raw[i];
      break;
    case 2:
      for (int64_t i = 0; i < n; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = over_white(raw[2 * i], raw[2 * i + 1]);
      break;
    case 3: std::memcpy(rgb, raw.data(), static_cast<size_t>(n) * 3); break;
    case 4: rgba_to_rgb(raw.data(), rgb, n); break;
    default: corrupt("PNG", "unexpected channel count " + std::to_string(layout.channels));
  }
  return out;
}

}  // namespace sanctum::image::detail
