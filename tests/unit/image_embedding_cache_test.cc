// ImageEmbeddingCache: the tower runs once per distinct content hash.
#include "model/vision/image_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"

namespace sanctum {
namespace {

ModelConfig tower_config() {
  ModelConfig c;
  c.vocab_size = 8;
  c.hidden_size = 3;
  c.has_vision = true;
  return c;
}

// A tower whose rows are the image's first pixel value, one row per merged token (merge 2).
class CountingTower : public Model {
 public:
  CountingTower() : Model(tower_config()) {}
  SequenceState new_state() const override { return SequenceState(); }
  Tensor forward(std::span<const int32_t>, SequenceState&, LogitsFor) override { return Tensor{}; }
  size_t weight_bytes_per_token() const override { return 0; }
  std::vector<ImageEmbeddings> encode_images(const Tensor& pixels, std::span<const GridThw> grids) override {
    ++runs;
    std::vector<ImageEmbeddings> out;
    for (const GridThw& g : grids) {
      ImageEmbeddings e{Tensor::zeros({g.t * (g.h / 2) * (g.w / 2), 3}, DType::f32), g.t, g.h / 2, g.w / 2};
      for (int64_t i = 0; i < e.rows.numel(); ++i) e.rows.data<float>()[i] = pixels.data<float>()[0];
      out.push_back(std::move(e));
    }
    return out;
  }
  int runs = 0;
};

TEST(ImageEmbeddingCache, the_same_hash_encodes_once_and_another_hash_again) {
  CountingTower tower;
  ImageEmbeddingCache cache(tower);
  const std::vector<float> a(4 * 6, 1.5f), b(4 * 6, 2.5f);
  const ImageHash ha{1}, hb{2};
  const GridThw grid{1, 2, 2};
  const ImageEmbeddings& first = cache.get(ha, a, 4, 6, grid);
  const ImageEmbeddings& again = cache.get(ha, b, 4, 6, grid);  // same hash: the cached rows, whatever is passed
  EXPECT_EQ(&first, &again);
  EXPECT_EQ(first.rows.data<float>()[0], 1.5f);
  EXPECT_EQ(tower.runs, 1);
  const ImageEmbeddings& other = cache.get(hb, b, 4, 6, grid);
  EXPECT_EQ(other.rows.data<float>()[0], 2.5f);
  EXPECT_EQ(first.tokens(), 1);
  EXPECT_EQ(tower.runs, 2);
  EXPECT_EQ(cache.tower_runs(), 2);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(ImageEmbeddingCache, pixels_that_do_not_fit_the_grid_are_refused) {
  CountingTower tower;
  ImageEmbeddingCache cache(tower);
  const std::vector<float> a(4 * 6, 1.0f);
  EXPECT_THROW(cache.get(ImageHash{3}, a, 4, 5, GridThw{1, 2, 2}), Error);
  EXPECT_THROW(cache.get(ImageHash{3}, a, 4, 6, GridThw{1, 2, 4}), Error);
  EXPECT_EQ(tower.runs, 0);
}

}  // namespace
}  // namespace sanctum
