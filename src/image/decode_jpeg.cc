// JPEG through libjpeg-turbo with PIL's decoder settings (the library defaults: islow IDCT, fancy
// upsampling). libjpeg reports errors by longjmp, so each step that can fail runs in a function whose
// frame holds no object with a destructor.
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
// jerror.h after jpeglib.h: it names the warning codes.
#include <jerror.h>

#include <csetjmp>
#include <vector>

#include "image/codecs.h"

namespace sanctum::image::detail {
namespace {

struct JpegErrors {
  jpeg_error_mgr base;  // first: libjpeg hands back a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

void on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings are not printed; the end of data before the last scanline is remembered (PIL refuses a
// truncated file, where libjpeg would pad it with gray). Other corrupt-data warnings pass, as in PIL.
void on_message(j_common_ptr cinfo, int level) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) e->truncated = true;
}

bool create(jpeg_decompress_struct* cinfo, JpegErrors* errors) {
  if (setjmp(errors->jump)) return false;
  jpeg_create_decompress(cinfo);
  return true;
}

bool read_header(jpeg_decompress_struct* cinfo, JpegErrors* errors) {
  if (setjmp(errors->jump)) return false;
  jpeg_read_header(cinfo, TRUE);
  // Gray stays gray (replicated below), CMYK/YCCK come out as CMYK, everything else as RGB.
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) cinfo->out_color_space = JCS_CMYK;
  else if (cinfo->jpeg_color_space != JCS_GRAYSCALE) cinfo->out_color_space = JCS_RGB;
  jpeg_calc_output_dimensions(cinfo);
  return true;
}

bool read_rows(jpeg_decompress_struct* cinfo, JpegErrors* errors, uint8_t* out, size_t row_bytes) {
  if (setjmp(errors->jump)) return false;
  jpeg_start_decompress(cinfo);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = out + static_cast<size_t>(cinfo->output_scanline) * row_bytes;
    jpeg_read_scanlines(cinfo, &row, 1);
    if (errors->truncated) {
      std::snprintf(errors->message, sizeof errors->message, "the data ends before the last row");
      return false;
    }
  }
  return true;
}

struct JpegHandle {
  jpeg_decompress_struct cinfo{};
  bool created = false;
  ~JpegHandle() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

// PIL's cmyk2rgb: (255 - k) - c * (255 - k) / 255, rounded.
uint8_t cmyk_channel(uint8_t c, uint8_t k) {
  const int nk = 255 - k;
  const int t = c * nk + 128;
  const int v = nk - (((t >> 8) + t) >> 8);
  return static_cast<uint8_t>(v < 0 ? 0 : v);
}

}  // namespace

RgbImage decode_jpeg(std::string_view bytes, const DecodeLimits& limits) {
  JpegErrors errors{};
  JpegHandle h;
  h.cinfo.err = jpeg_std_error(&errors.base);
  errors.base.error_exit = on_error;
  errors.base.emit_message = on_message;
  if (!create(&h.cinfo, &errors)) corrupt("JPEG", errors.message);
  h.created = true;
  jpeg_mem_src(&h.cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  if (!read_header(&h.cinfo, &errors)) corrupt("JPEG", errors.message);
  check_size("JPEG", h.cinfo.output_width, h.cinfo.output_height, limits);

  const int64_t w = h.cinfo.output_width, ht = h.cinfo.output_height, n = w * ht;
  const int channels = h.cinfo.output_components;
  const bool adobe_inverted = h.cinfo.saw_Adobe_marker;
  std::vector<uint8_t> raw(static_cast<size_t>(n) * channels);
  if (!read_rows(&h.cinfo, &errors, raw.data(), static_cast<size_t>(w) * channels)) corrupt("JPEG", errors.message);

  RgbImage out{w, ht, std::vector<uint8_t>(static_cast<size_t>(n) * 3)};
  uint8_t* rgb = out.pixels.data();
  if (channels == 3) return RgbImage{w, ht, std::move(raw)};
  if (channels == 1) {
    for (int64_t i = 0; i < n; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = raw[i];
  } else if (channels == 4) {
    // Adobe CMYK JPEGs store inverted ink (PIL's "CMYK;I" raw mode).
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* p = raw.data() + 4 * i;
      if (adobe_inverted)
        for (int c = 0; c < 4; ++c) p[c] = static_cast<uint8_t>(255 - p[c]);
      for (int c = 0; c < 3; ++c) rgb[3 * i + c] = cmyk_channel(p[c], p[3]);
    }
  } else {
    corrupt("JPEG", "unexpected component count " + std::to_string(channels));
  }
  return out;
}

}  // namespace sanctum::image::detail
