#include "model/mrope.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "base/error.h"

namespace sanctum {

MropeTables mrope_tables(const ops::RopeTable& text, std::span<const int> sections, bool interleaved) {
  check(sections.size() == 3, ErrorKind::invalid_input, "config.json: mrope_section must have 3 entries (t, h, w) for image input");
  const std::vector<float>& f = text.inv_freq();
  std::vector<float> t(f.size(), 0.0f), h(f.size(), 0.0f), w(f.size(), 0.0f);
  for (size_t j = 0; j < f.size(); ++j) {
    const int64_t i = static_cast<int64_t>(j);
    int which = 0;  // t
    if (interleaved) {
      if (i % 3 == 1 && i < 3 * sections[1]) which = 1;
      else if (i % 3 == 2 && i < 3 * sections[2]) which = 2;
    } else if (i >= sections[0] && i < sections[0] + sections[1]) {
      which = 1;
    } else if (i >= sections[0] + sections[1] && i < sections[0] + sections[1] + sections[2]) {
      which = 2;
    }
    (which == 0 ? t : which == 1 ? h : w)[j] = f[j];
  }
  check(text.magnitude() == 1.0f, ErrorKind::unsupported, "multimodal RoPE with a scaled (YaRN) table is not supported");
  return {ops::RopeTable::from_inv_freq(std::move(t)), ops::RopeTable::from_inv_freq(std::move(h)),
          ops::RopeTable::from_inv_freq(std::move(w))};
}

PromptLayout layout_prompt(int64_t pos0, int64_t delta, int64_t n, std::span<const PromptImage> images, int64_t hidden) {
  check(pos0 + n + std::abs(delta) + 1 < std::numeric_limits<int32_t>::max(), ErrorKind::invalid_argument,
        "forward_images: positions overflow");
  PromptLayout l;
  const size_t count = static_cast<size_t>(n);
  l.t.resize(count);
  l.h.resize(count);
  l.w.resize(count);
  l.image_row.assign(count, nullptr);
  int64_t i = 0;
  auto text_until = [&](int64_t end) {
    for (; i < end; ++i) {
      const auto at = static_cast<size_t>(i);
      l.t[at] = l.h[at] = l.w[at] = static_cast<int32_t>(pos0 + i + delta);
    }
  };
  for (const PromptImage& p : images) {
    check(p.image != nullptr, ErrorKind::invalid_argument, "forward_images: an image has no embeddings");
    const ImageEmbeddings& img = *p.image;
    const int64_t first = std::max<int64_t>(p.offset, 0), end = std::min(p.offset + img.tokens(), n);
    check(first >= i && img.tokens() > 0 && first < end, ErrorKind::invalid_argument,
          "forward_images: the image at token " + std::to_string(p.offset) + " (" + std::to_string(img.tokens()) +
              " tokens) overlaps the one before or lies outside the " + std::to_string(n) + " tokens");
    check(img.rows.dtype() == DType::f32 && img.rows.device() == Device::cpu && img.rows.ndim() == 2 && img.rows.dim(0) == img.tokens() &&
              img.rows.dim(1) == hidden && img.rows.stride(1) == 1,
          ErrorKind::invalid_argument,
          "forward_images: image rows must be host f32 (" + std::to_string(img.tokens()) + ", " + std::to_string(hidden) + "), got " +
              img.rows.shape_string());
    text_until(first);
    // Where the next text token would have been; an image begun by an earlier forward started there
    // too, since the delta changes only once an image is complete.
    const int64_t start = pos0 + p.offset + delta;
    for (; i < end; ++i) {
      const int64_t j = i - p.offset, f = j / (img.h * img.w), r = j / img.w % img.h, c = j % img.w;
      const auto at = static_cast<size_t>(i);
      l.t[at] = static_cast<int32_t>(start + f);
      l.h[at] = static_cast<int32_t>(start + r);
      l.w[at] = static_cast<int32_t>(start + c);
      l.image_row[at] = img.rows.data<float>() + j * img.rows.stride(0);
    }
    // The text after continues at start + max(h, w); until the image is complete, the delta is the one before it.
    if (p.offset + img.tokens() <= n) delta += std::max(img.h, img.w) - img.tokens();
    l.has_images = true;
  }
  text_until(n);
  l.next_delta = delta;
  return l;
}

}  // namespace sanctum
