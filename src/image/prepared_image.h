#pragma once
// One request image after decoding and preprocessing: what the vision tower consumes and what the
// prompt reserves for it. The layout is the transformers Qwen2-VL image processor's (the Qwen3-VL
// and Qwen3.5 checkpoints name that family), so a tower written against transformers reads it as is.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sanctum::image {

struct PreparedImage {
  // (grid_t * grid_h * grid_w, channels * temporal_patch * patch * patch), row-major f32, normalized.
  // Rows run (h / merge, w / merge, merge_row, merge_col); each row is (channel, t, patch_y, patch_x).
  std::vector<float> pixel_values;
  int64_t rows = 0;
  int64_t cols = 0;
  std::array<int64_t, 3> grid_thw{};  // {t, h, w} in patches; t = 1 for a still image
  int64_t merge_size = 2;             // spatial_merge_size: merge_size^2 patches become one token
  // SHA-256 over the decoded RGB pixels and the size (width, height as 4-byte little-endian each,
  // then width * height * 3 bytes): equal images give equal keys whatever their encoding.
  std::array<uint8_t, 32> content_hash{};

  // Placeholder tokens the image occupies in the prompt: t * h * w / merge_size^2.
  int64_t token_count() const { return grid_thw[0] * grid_thw[1] * grid_thw[2] / (merge_size * merge_size); }
};

}  // namespace sanctum::image
