// Multimodal rotary positions (model/mrope.h) as transformers' get_rope_index lays them out.
#include "model/mrope.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"

namespace sanctum {
namespace {

ImageEmbeddings image(int64_t t, int64_t h, int64_t w, int64_t hidden = 4) {
  return {Tensor::zeros({t * h * w, hidden}, DType::f32), t, h, w};
}

TEST(MropeLayout, text_only_positions_are_the_sequence_index_plus_the_delta) {
  const PromptLayout l = layout_prompt(10, 3, 4, {}, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(l.t[i], 13 + i);
    EXPECT_EQ(l.h[i], 13 + i);
    EXPECT_EQ(l.w[i], 13 + i);
    EXPECT_EQ(l.image_row[i], nullptr);
  }
  EXPECT_EQ(l.next_delta, 3);
  EXPECT_FALSE(l.has_images);
}

TEST(MropeLayout, an_image_takes_its_grid_and_text_after_continues_past_its_largest_extent) {
  const ImageEmbeddings img = image(1, 2, 3);
  const PromptImage placed[] = {{2, &img}};
  const PromptLayout l = layout_prompt(0, 0, 10, placed, 4);
  // text 0, 1; image rows r, columns c at (2, 2 + r, 2 + c); text after at 2 + max(2, 3) = 5.
  EXPECT_EQ(l.t[1], 1);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) {
      const int i = 2 + r * 3 + c;
      EXPECT_EQ(l.t[i], 2);
      EXPECT_EQ(l.h[i], 2 + r);
      EXPECT_EQ(l.w[i], 2 + c);
      EXPECT_EQ(l.image_row[i], img.rows.data<float>() + (r * 3 + c) * 4);
    }
  EXPECT_EQ(l.t[8], 5);
  EXPECT_EQ(l.w[9], 6);
  EXPECT_EQ(l.next_delta, 5 - 8);
  EXPECT_TRUE(l.has_images);
}

TEST(MropeLayout, a_later_forward_continues_from_the_carried_delta) {
  const ImageEmbeddings a = image(1, 4, 2), b = image(1, 2, 2);
  const PromptImage both[] = {{1, &a}, {10, &b}};
  const PromptLayout whole = layout_prompt(0, 0, 16, both, 4);
  // The same tokens in two forwards: the first ends after image a, the second starts with the delta.
  const PromptImage first[] = {{1, &a}};
  const PromptLayout head = layout_prompt(0, 0, 9, first, 4);
  const PromptImage second[] = {{1, &b}};
  const PromptLayout tail = layout_prompt(9, head.next_delta, 7, second, 4);
  for (int i = 0; i < 16; ++i) {
    const PromptLayout& part = i < 9 ? head : tail;
    const int j = i < 9 ? i : i - 9;
    EXPECT_EQ(whole.t[i], part.t[j]) << i;
    EXPECT_EQ(whole.h[i], part.h[j]) << i;
    EXPECT_EQ(whole.w[i], part.w[j]) << i;
  }
  EXPECT_EQ(whole.next_delta, tail.next_delta);
}

TEST(MropeLayout, a_prompt_split_anywhere_even_inside_an_image_lays_out_as_one_forward) {
  const ImageEmbeddings a = image(1, 3, 5), b = image(1, 2, 2);
  const PromptImage both[] = {{2, &a}, {19, &b}};
  const PromptLayout whole = layout_prompt(0, 0, 26, both, 4);
  for (int64_t cut1 = 1; cut1 < 25; ++cut1)
    for (int64_t cut2 = cut1 + 1; cut2 < 26; ++cut2) {
      // Forwards [0, cut1), [cut1, cut2), [cut2, 26), each given the images that overlap it.
      const int64_t cuts[] = {0, cut1, cut2, 26};
      int64_t delta = 0;
      for (int part = 0; part < 3; ++part) {
        const int64_t lo = cuts[part], hi = cuts[part + 1];
        std::vector<PromptImage> in;
        for (const PromptImage& p : both)
          if (p.offset < hi && p.offset + p.image->tokens() > lo) in.push_back({p.offset - lo, p.image});
        const PromptLayout l = layout_prompt(lo, delta, hi - lo, in, 4);
        for (int64_t i = lo; i < hi; ++i) {
          const auto w = static_cast<size_t>(i), at = static_cast<size_t>(i - lo);
          ASSERT_EQ(l.t[at], whole.t[w]) << cut1 << " " << cut2 << " " << i;
          ASSERT_EQ(l.h[at], whole.h[w]) << cut1 << " " << cut2 << " " << i;
          ASSERT_EQ(l.w[at], whole.w[w]) << cut1 << " " << cut2 << " " << i;
          ASSERT_EQ(l.image_row[at], whole.image_row[w]) << cut1 << " " << cut2 << " " << i;
        }
        delta = l.next_delta;
      }
      EXPECT_EQ(delta, whole.next_delta);
    }
}

TEST(MropeLayout, overlapping_or_outlying_images_are_refused) {
  const ImageEmbeddings a = image(1, 2, 2);
  const PromptImage overlap[] = {{0, &a}, {2, &a}};
  EXPECT_THROW(layout_prompt(0, 0, 10, overlap, 4), Error);
  const PromptImage after[] = {{10, &a}};
  EXPECT_THROW(layout_prompt(0, 0, 10, after, 4), Error);
  const PromptImage before[] = {{-4, &a}};
  EXPECT_THROW(layout_prompt(0, 0, 10, before, 4), Error);
  const PromptImage wrong_width[] = {{0, &a}};
  EXPECT_THROW(layout_prompt(0, 0, 10, wrong_width, 8), Error);
}

TEST(MropeTables, interleaved_sections_split_every_frequency_once) {
  ops::RopeConfig rc;
  rc.head_dim = 64;
  rc.rotary_dim = 18;  // 9 frequencies
  const ops::RopeTable text(rc);
  const int sections[] = {3, 3, 2};
  const MropeTables m = mrope_tables(text, sections, true);
  for (size_t j = 0; j < 9; ++j) {
    const float t = m.t.inv_freq()[j], h = m.h.inv_freq()[j], w = m.w.inv_freq()[j];
    EXPECT_EQ(t + h + w, text.inv_freq()[j]) << j;
    EXPECT_EQ((t != 0) + (h != 0) + (w != 0), 1) << j;
    const bool is_h = j % 3 == 1 && j < 9, is_w = j % 3 == 2 && j < 6;
    EXPECT_EQ(h != 0, is_h) << j;
    EXPECT_EQ(w != 0, is_w) << j;
  }
  const MropeTables runs = mrope_tables(text, sections, false);
  for (size_t j = 0; j < 9; ++j) EXPECT_EQ(runs.h.inv_freq()[j] != 0, j >= 3 && j < 6) << j;
}

}  // namespace
}  // namespace sanctum
