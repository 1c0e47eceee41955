#pragma once
// Multimodal rotary positions (Qwen2-VL .. Qwen3.5, transformers' get_rope_index): each token has a
// (t, h, w) position. Text tokens have all three equal and advance by one; an image's tokens take
// (start, start + row, start + column) over its language-model grid, start being the position the
// next text token would have had; text after the image continues at start + max(h, w) (one past the
// image's largest position). The rotary frequencies split into three sections, each turned by one
// component; with equal components that is plain RoPE.
#include <cstdint>
#include <span>
#include <vector>

#include "model/vision/image_input.h"
#include "ops/rope.h"

namespace sanctum {

// The text model's RopeTable split into three tables (t, h, w), each with the frequencies of its
// section and zeros elsewhere (ops::RopeTable::from_inv_freq): rotating by all three, each with its
// own positions, is the multimodal rotation. interleaved (Qwen3-VL, Qwen3.5): frequency j is h's
// when j % 3 == 1 and j < 3 * sections[1], w's when j % 3 == 2 and j < 3 * sections[2], else t's;
// otherwise (Qwen2-VL) consecutive runs of sections[0], [1], [2] frequencies.
struct MropeTables {
  ops::RopeTable t, h, w;
};
MropeTables mrope_tables(const ops::RopeTable& text, std::span<const int> sections, bool interleaved);

// The rotary positions of a forward's rows: t, h, w of equal length, and the tables that turn them.
struct MropeRows {
  std::span<const int32_t> t, h, w;
  const MropeTables* tables = nullptr;
};

// A forward's tokens laid out: per token its (t, h, w) position and, for image placeholders, the
// image row that replaces its embedding (null for text).
struct PromptLayout {
  std::vector<int32_t> t, h, w;
  std::vector<const float*> image_row;
  int64_t next_delta = 0;  // the state's rope_delta after these tokens
  bool has_images = false;
};
// Tokens [0, n) at sequence index pos0 onwards with the state's rope_delta `delta` before them.
// Images come in order, without overlap, each with rows (tokens, hidden) f32 on the host; an image
// may have begun in an earlier forward (negative offset) or go on in a later one (past n), so a
// prompt can be prefilled in pieces split anywhere: while an image is incomplete the delta stays the
// one before it. Throws invalid_argument naming what does not fit.
PromptLayout layout_prompt(int64_t pos0, int64_t delta, int64_t n, std::span<const PromptImage> images, int64_t hidden);

}  // namespace sanctum
