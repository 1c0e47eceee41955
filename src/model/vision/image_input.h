#pragma once
// Images as the model interface takes them: the grid a processor gives, the vision tower's output for
// one image, and where that output goes in a forward's tokens.
#include <cstdint>

#include "tensor/tensor.h"

namespace sanctum {

// An image's patch grid as the processor gives it (grid_thw): temporal patches, rows and columns
// of patches (rows and columns multiples of the tower's spatial_merge_size).
struct GridThw {
  int64_t t = 1, h = 0, w = 0;
  int64_t patches() const { return t * h * w; }
};

// One image encoded: rows (t * h * w, hidden) f32 on the host, one per placeholder token, in the
// language model's grid (t, h, w) (the patch grid merged: h and w divided by spatial_merge_size).
struct ImageEmbeddings {
  Tensor rows;
  int64_t t = 1, h = 0, w = 0;
  int64_t tokens() const { return t * h * w; }
};

// An image in a forward's tokens: tokens [offset, offset + image->tokens()) are its placeholders,
// counted from the forward's first token (negative: the image began in an earlier forward).
struct PromptImage {
  int64_t offset = 0;
  const ImageEmbeddings* image = nullptr;
};

}  // namespace sanctum
