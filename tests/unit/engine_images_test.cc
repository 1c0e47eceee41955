// The engine with images in a job's prompt: the prompt through the last image goes to
// Model::forward_images, with the images at their offsets; the rest runs as any prompt; the prompt
// cache serves such a prompt again only with the same image content.
#include <gtest/gtest.h>

#include <future>
#include <mutex>

#include "engine/engine.h"
#include "server/server_metrics.h"

namespace sanctum::server {
namespace {

ModelConfig fake_config() {
  ModelConfig c;
  c.model_type = "fake";
  c.vocab_size = 8;
  c.hidden_size = 2;
  c.eos_token_ids = {7};
  c.has_vision = true;
  return c;
}

// Next token (last + 1) % 7; records what forward_images receives.
class FakeVisionModel : public Model {
 public:
  FakeVisionModel() : Model(fake_config()), logits_(Tensor::zeros({1, 8}, DType::f32)) {}
  SequenceState new_state() const override { return SequenceState(); }
  Tensor forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor) override {
    state.advance(static_cast<int64_t>(tokens.size()));
    float* row = logits_.data<float>();
    for (int i = 0; i < 8; ++i) row[i] = 0.0f;
    row[(tokens.back() + 1) % 7] = 5.0f;
    return logits_;
  }
  Tensor forward_images(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which,
                        std::span<const PromptImage> images) override {
    std::lock_guard<std::mutex> lock(mutex);
    image_prefills.push_back(std::vector<int32_t>(tokens.begin(), tokens.end()));
    for (const PromptImage& p : images) offsets.push_back(p.offset);
    state.set_rope_delta(-1);
    return forward(tokens, state, which);
  }
  size_t weight_bytes_per_token() const override { return 0; }
  std::mutex mutex;
  std::vector<std::vector<int32_t>> image_prefills;
  std::vector<int64_t> offsets;

 private:
  Tensor logits_;
};

struct Sink : GenerationSink {
  std::vector<int32_t> tokens;
  std::promise<std::string> done;
  bool on_token(int, const TokenOutput& t) override {
    tokens.push_back(t.token);
    return true;
  }
  void on_choice_end(int, const GenerationResult&) override {}
  void on_done(const std::string& error) override { done.set_value(error); }
};

std::shared_ptr<InferenceJob> image_job(std::shared_ptr<Sink> sink, std::shared_ptr<const ImageEmbeddings> image, uint8_t content = 1) {
  auto job = std::make_shared<InferenceJob>();
  job->prompt = {1, 5, 5, 5, 5, 2, 3};  // tokens 1..4 are the image's placeholders
  JobImage placed;
  placed.offset = 1;
  placed.embeddings = std::move(image);
  placed.hash.fill(content);
  job->images = {std::move(placed)};
  job->params.max_tokens = 3;
  job->params.ignore_eos = true;
  job->sink = std::move(sink);
  return job;
}

TEST(EngineImages, the_prompt_through_the_image_prefills_with_it_and_the_cache_serves_it_only_for_the_same_image) {
  ServerMetrics metrics;
  auto model = std::make_unique<FakeVisionModel>();
  FakeVisionModel* fake = model.get();
  EngineOptions options;
  options.prompt_cache_bytes = size_t{1} << 20;
  Engine engine("fake", std::move(model), options, metrics.engine);
  auto image = std::make_shared<ImageEmbeddings>(ImageEmbeddings{Tensor::zeros({4, 2}, DType::f32), 1, 2, 2});
  // The same tokens three times: with image content 1, again with 1 (the cache holds it past the
  // image), then with content 2 (the placeholders' ids are equal, the content is not: no reuse).
  const uint8_t contents[] = {1, 1, 2};
  for (uint8_t content : contents) {
    auto sink = std::make_shared<Sink>();
    auto done = sink->done.get_future();
    ASSERT_EQ(engine.submit(image_job(sink, image, content)), Engine::Admit::accepted);
    EXPECT_EQ(done.get(), "");
    EXPECT_EQ(sink->tokens, (std::vector<int32_t>{4, 5, 6}));
  }
  std::lock_guard<std::mutex> lock(fake->mutex);
  ASSERT_EQ(fake->image_prefills.size(), 2u);
  EXPECT_EQ(fake->image_prefills[0], (std::vector<int32_t>{1, 5, 5, 5, 5}));
  EXPECT_EQ(fake->image_prefills[1], (std::vector<int32_t>{1, 5, 5, 5, 5}));
  EXPECT_EQ(fake->offsets, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(engine.prompt_cache_stats().hits, 1);
}

TEST(EngineImages, an_image_prompt_prefills_in_pieces_of_a_prefill_chunk_even_inside_the_image) {
  ServerMetrics metrics;
  auto model = std::make_unique<FakeVisionModel>();
  FakeVisionModel* fake = model.get();
  Engine engine("fake", std::move(model), EngineOptions{}, metrics.engine);
  auto sink = std::make_shared<Sink>();
  auto done = sink->done.get_future();
  auto job = image_job(sink, std::make_shared<ImageEmbeddings>(ImageEmbeddings{Tensor::zeros({4, 2}, DType::f32), 1, 2, 2}));
  job->params.prefill_chunk = 2;
  ASSERT_EQ(engine.submit(job), Engine::Admit::accepted);
  EXPECT_EQ(done.get(), "");
  EXPECT_EQ(sink->tokens, (std::vector<int32_t>{4, 5, 6}));
  std::lock_guard<std::mutex> lock(fake->mutex);
  // Tokens [0, 2), [2, 4), [4, 5): the image (tokens 1..4) at offset 1, then -1, then -3 of each piece.
  ASSERT_EQ(fake->image_prefills.size(), 3u);
  EXPECT_EQ(fake->image_prefills[0], (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(fake->image_prefills[1], (std::vector<int32_t>{5, 5}));
  EXPECT_EQ(fake->image_prefills[2], (std::vector<int32_t>{5}));
  EXPECT_EQ(fake->offsets, (std::vector<int64_t>{1, -1, -3}));
}

TEST(EngineImages, a_prompt_that_ends_with_its_image_is_refused) {
  ServerMetrics metrics;
  Engine engine("fake", std::make_unique<FakeVisionModel>(), EngineOptions{}, metrics.engine);
  auto sink = std::make_shared<Sink>();
  auto done = sink->done.get_future();
  auto job = image_job(sink, std::make_shared<ImageEmbeddings>(ImageEmbeddings{Tensor::zeros({4, 2}, DType::f32), 1, 2, 2}));
  job->prompt.resize(5);
  engine.submit(job);
  EXPECT_NE(done.get(), "");
}

}  // namespace
}  // namespace sanctum::server
