// WebP through libwebp: the first frame as RGBA (as PIL's decoder asks for it), transparency
// composited onto white. Animated files decode their first frame only through the demuxer.
#include <webp/decode.h>
#include <webp/demux.h>

#include <vector>

#include "image/codecs.h"

namespace sanctum::image::detail {
namespace {

struct Demuxer {
  WebPDemuxer* demux = nullptr;
  WebPIterator iter{};
  bool has_frame = false;
  ~Demuxer() {
    if (has_frame) WebPDemuxReleaseIterator(&iter);
    WebPDemuxDelete(demux);
  }
};

}  // namespace

RgbImage decode_webp(std::string_view bytes, const DecodeLimits& limits) {
  WebPData data{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
  Demuxer d;
  d.demux = WebPDemux(&data);
  if (!d.demux) corrupt("WebP", "the RIFF container does not parse");
  const int64_t width = WebPDemuxGetI(d.demux, WEBP_FF_CANVAS_WIDTH);
  const int64_t height = WebPDemuxGetI(d.demux, WEBP_FF_CANVAS_HEIGHT);
  check_size("WebP", width, height, limits);
  d.has_frame = WebPDemuxGetFrame(d.demux, 1, &d.iter) != 0;
  if (!d.has_frame) corrupt("WebP", "it holds no frame");
  if (d.iter.width != width || d.iter.height != height || d.iter.x_offset != 0 || d.iter.y_offset != 0)
    corrupt("WebP", "its first frame does not cover the canvas");

  const int64_t n = width * height;
  std::vector<uint8_t> rgba(static_cast<size_t>(n) * 4);
  const uint8_t* decoded =
      WebPDecodeRGBAInto(d.iter.fragment.bytes, d.iter.fragment.size, rgba.data(), rgba.size(), static_cast<int>(width * 4));
  if (!decoded) corrupt("WebP", "the bitstream does not decode");
  RgbImage out{width, height, std::vector<uint8_t>(static_cast<size_t>(n) * 3)};
  rgba_to_rgb(rgba.data(), out.pixels.data(), n);
  return out;
}

}  // namespace sanctum::image::detail
