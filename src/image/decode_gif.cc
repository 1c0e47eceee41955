// GIF through giflib: the first frame only, read record by record (never the whole animation), on a
// canvas laid out as PIL lays out frame 0: the logical screen grown to hold the frame, filled with
// the transparent index when there is one (else index 0); transparency composited onto white.
#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "image/codecs.h"

namespace sanctum::image::detail {
namespace {

struct GifSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
};

int read_bytes(GifFileType* gif, GifByteType* out, int n) {
  auto* s = static_cast<GifSource*>(gif->UserData);
  const size_t take = std::min(static_cast<size_t>(n), s->size - s->pos);
  std::memcpy(out, s->data + s->pos, take);
  s->pos += take;
  return static_cast<int>(take);
}

struct GifHandle {
  GifFileType* gif = nullptr;
  ~GifHandle() {
    int ignored;
    if (gif) DGifCloseFile(gif, &ignored);
  }
};

std::string gif_error(const GifFileType* gif) {
  const char* m = GifErrorString(gif->Error);
  return m ? m : "giflib error " + std::to_string(gif->Error);
}

}  // namespace

RgbImage decode_gif(std::string_view bytes, const DecodeLimits& limits) {
  GifSource source{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0};
  GifHandle h;
  int error = 0;
  h.gif = DGifOpen(&source, read_bytes, &error);
  if (!h.gif) corrupt("GIF", GifErrorString(error) ? GifErrorString(error) : "the header does not parse");
  GifFileType* gif = h.gif;

  int transparent = -1;  // from the last graphic control extension before the frame
  for (;;) {
    GifRecordType record;
    if (DGifGetRecordType(gif, &record) == GIF_ERROR) corrupt("GIF", gif_error(gif));
    if (record == TERMINATE_RECORD_TYPE) corrupt("GIF", "it holds no frame");
    if (record == EXTENSION_RECORD_TYPE) {
      int code;
      GifByteType* block;
      if (DGifGetExtension(gif, &code, &block) == GIF_ERROR) corrupt("GIF", gif_error(gif));
      // block[0] is the length; a graphic control block is flags, delay (2), transparent index.
      if (code == GRAPHICS_EXT_FUNC_CODE && block && block[0] >= 4) transparent = (block[1] & 1) ? block[4] : -1;
      while (block)
        if (DGifGetExtensionNext(gif, &block) == GIF_ERROR) corrupt("GIF", gif_error(gif));
      continue;
    }
    if (record == IMAGE_DESC_RECORD_TYPE) break;
    corrupt("GIF", "unexpected record type");
  }
  if (DGifGetImageDesc(gif) == GIF_ERROR) corrupt("GIF", gif_error(gif));
  const GifImageDesc& desc = gif->Image;
  const int64_t x0 = desc.Left, y0 = desc.Top, fw = desc.Width, fh = desc.Height;
  const int64_t width = std::max<int64_t>(gif->SWidth, x0 + fw), height = std::max<int64_t>(gif->SHeight, y0 + fh);
  check_size("GIF", width, height, limits);
  if (fw <= 0 || fh <= 0) corrupt("GIF", "its first frame is empty");

  std::vector<uint8_t> index(static_cast<size_t>(width * height), static_cast<uint8_t>(transparent >= 0 ? transparent : 0));
  std::vector<GifPixelType> line(static_cast<size_t>(fw));
  // Interlaced frames store rows in four passes: every 8th from 0, every 8th from 4, every 4th from 2, every 2nd from 1.
  static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
  const int passes = desc.Interlace ? 4 : 1;
  for (int pass = 0; pass < passes; ++pass) {
    const int64_t start = desc.Interlace ? kStart[pass] : 0, step = desc.Interlace ? kStep[pass] : 1;
    for (int64_t y = start; y < fh; y += step) {
      if (DGifGetLine(gif, line.data(), static_cast<int>(fw)) == GIF_ERROR) corrupt("GIF", gif_error(gif));
      std::memcpy(index.data() + (y0 + y) * width + x0, line.data(), static_cast<size_t>(fw));
    }
  }

  // No colour map at all: PIL reads the indices as gray ("L").
  const ColorMapObject* map = desc.ColorMap ? desc.ColorMap : gif->SColorMap;
  uint8_t palette[256][3] = {};
  for (int i = 0; i < 256; ++i) {
    if (!map) palette[i][0] = palette[i][1] = palette[i][2] = static_cast<uint8_t>(i);
    else if (i < map->ColorCount)
      palette[i][0] = map->Colors[i].Red, palette[i][1] = map->Colors[i].Green, palette[i][2] = map->Colors[i].Blue;
  }
  if (transparent >= 0) palette[transparent][0] = palette[transparent][1] = palette[transparent][2] = over_white(0, 0);
  RgbImage out{width, height, std::vector<uint8_t>(index.size() * 3)};
  for (size_t i = 0; i < index.size(); ++i) std::memcpy(out.pixels.data() + 3 * i, palette[index[i]], 3);
  return out;
}

}  // namespace sanctum::image::detail
