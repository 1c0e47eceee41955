#include "model/vision/image_cache.h"

#include <cstring>

#include "base/error.h"

namespace sanctum {

const ImageEmbeddings& ImageEmbeddingCache::get(const ImageHash& hash, std::span<const float> pixel_values, int64_t rows, int64_t cols,
                                                const GridThw& grid) {
  if (auto it = entries_.find(hash); it != entries_.end()) return it->second;
  check(rows > 0 && cols > 0 && static_cast<int64_t>(pixel_values.size()) == rows * cols && rows == grid.patches(),
        ErrorKind::invalid_argument,
        "image cache: pixel_values hold " + std::to_string(pixel_values.size()) + " values for (" + std::to_string(rows) + ", " +
            std::to_string(cols) + ") and a grid of " + std::to_string(grid.patches()) + " patches");
  Tensor pixels = Tensor::zeros({rows, cols}, DType::f32);
  std::memcpy(pixels.raw(), pixel_values.data(), pixel_values.size() * sizeof(float));
  const GridThw grids[1] = {grid};
  std::vector<ImageEmbeddings> encoded = model_.encode_images(pixels, grids);
  check(encoded.size() == 1, ErrorKind::internal, "image cache: the tower returned " + std::to_string(encoded.size()) + " images for one");
  ++tower_runs_;
  return entries_.emplace(hash, std::move(encoded[0])).first->second;
}

}  // namespace sanctum
