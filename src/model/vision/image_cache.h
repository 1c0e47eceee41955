#pragma once
// One vision tower run per distinct image: a request that shows the same image in several turns (or
// twice in one) encodes it once. Keyed by the content hash the preprocessing computes over the
// decoded pixels (image::PreparedImage::content_hash), so equal images match whatever their encoding.
#include <array>
#include <cstdint>
#include <map>
#include <span>

#include "model/model.h"

namespace sanctum {

using ImageHash = std::array<uint8_t, 32>;

class ImageEmbeddingCache {
 public:
  // Encodes with `model`'s tower, which must outlive the cache.
  explicit ImageEmbeddingCache(Model& model) : model_(model) {}

  // The embeddings of the image with `hash`: from an earlier call with the same hash, or the tower's
  // output for pixel_values ((rows, cols) f32 row-major, the processor's layout) of `grid`. The
  // reference stays valid as long as the cache.
  const ImageEmbeddings& get(const ImageHash& hash, std::span<const float> pixel_values, int64_t rows, int64_t cols, const GridThw& grid);

  int64_t tower_runs() const { return tower_runs_; }
  size_t size() const { return entries_.size(); }

 private:
  Model& model_;
  std::map<ImageHash, ImageEmbeddings> entries_;
  int64_t tower_runs_ = 0;
};

}  // namespace sanctum
