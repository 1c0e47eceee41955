// The weight stream learns which weight follows which from the reads reported to it, wraps from a
// step's last weight to its first, follows a changed order, keeps the weights it names alive, and
// is what the calling thread's innermost scope opened.
#include "ops/weight_stream.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

namespace sanctum {
namespace {

Weight weight(int64_t rows) { return dense_weight(Tensor::zeros({rows, 8}, DType::f32)); }

TEST(WeightStream, learns_the_order_wrapping_from_the_last_weight_to_the_first) {
  const Weight a = weight(1), b = weight(2), c = weight(3);
  ops::WeightStream s;
  EXPECT_EQ(s.next_after(a), nullptr);
  s.reading({a});
  s.reading({b, 3, 7});
  s.reading({c});
  EXPECT_EQ(s.next_after(a)->weight.data.raw(), b.data.raw());
  EXPECT_EQ(s.next_after(a)->parts, 3);
  EXPECT_EQ(s.next_after(a)->part_tiles, 7);
  EXPECT_EQ(s.next_after(b)->weight.data.raw(), c.data.raw());
  EXPECT_EQ(s.next_after(c), nullptr) << "nothing followed c yet";
  s.reading({a});  // the next step begins
  EXPECT_EQ(s.next_after(c)->weight.data.raw(), a.data.raw());
  EXPECT_EQ(s.known(), 3u);
}

TEST(WeightStream, follows_a_changed_order_and_changed_parts) {
  const Weight a = weight(1), b = weight(2), c = weight(3);
  ops::WeightStream s;
  s.reading({a});
  s.reading({b});
  s.reading({a});
  s.reading({c});
  EXPECT_EQ(s.next_after(a)->weight.data.raw(), c.data.raw());
  s.reading({a});
  s.reading({c, 2, 5});
  EXPECT_EQ(s.next_after(a)->parts, 2);
  EXPECT_EQ(s.next_after(a)->part_tiles, 5);
}

TEST(WeightStream, keeps_the_weights_it_names_alive) {
  static float values[8] = {};
  bool freed = false;
  {
    ops::WeightStream s;
    const Weight a = weight(1);
    {
      // A weight over memory whose owner reports when it is let go.
      const std::shared_ptr<const void> owner(values, [&freed](const void*) { freed = true; });
      const Weight b = dense_weight(Tensor::view_of(values, {1, 8}, DType::f32, owner));
      s.reading({a});
      s.reading({b});
    }
    EXPECT_FALSE(freed) << "the stream's copy of b holds its storage";
    EXPECT_EQ(s.next_after(a)->weight.data.raw(), static_cast<void*>(values));
  }
  EXPECT_TRUE(freed) << "and lets it go with the stream";
}

TEST(WeightStream, scopes_nest_per_thread) {
  ops::WeightStream outer, inner;
  EXPECT_EQ(ops::WeightStream::current(), nullptr);
  {
    const ops::WeightStream::Scope a(outer);
    EXPECT_EQ(ops::WeightStream::current(), &outer);
    {
      const ops::WeightStream::Scope b(inner);
      EXPECT_EQ(ops::WeightStream::current(), &inner);
      std::thread([] { EXPECT_EQ(ops::WeightStream::current(), nullptr); }).join();
    }
    EXPECT_EQ(ops::WeightStream::current(), &outer);
  }
  EXPECT_EQ(ops::WeightStream::current(), nullptr);
}

}  // namespace
}  // namespace sanctum
