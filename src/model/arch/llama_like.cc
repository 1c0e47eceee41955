#include "model/arch/llama_like.h"

#include <numeric>
#include <vector>

#include "base/error.h"
#include "model/blocks/attention.h"
#include "model/blocks/mlp.h"
#include "model/blocks/workspace.h"
#include "ops/ops.h"

namespace sanctum {

namespace {

struct LlamaLikeOptions {
  bool qkv_bias = false;
};

class LlamaLikeModel final : public Model {
 public:
  LlamaLikeModel(ModelConfig config, Checkpoint& ckpt, const LlamaLikeOptions& options) : Model(std::move(config)) {
    const ModelConfig& c = config_;
    check(c.intermediate_size > 0, ErrorKind::invalid_input, c.dir + "/config.json: missing key 'intermediate_size'");
    check(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, ErrorKind::invalid_input,
          c.dir + "/config.json: num_attention_heads must be a multiple of num_key_value_heads");
    check(!c.bool_or("rope_traditional", false), ErrorKind::unsupported,
          c.dir + "/config.json: rope_traditional=true (interleaved RoPE) is not supported");
    const QuantConfig& q = c.quant;
    embed_ = ckpt.linear("model.embed_tokens", c.vocab_size, c.hidden_size, q);
    norm_ = ckpt.tensor("model.norm.weight", {c.hidden_size});
    // Tied when the checkpoint has no lm_head (mlx-lm drops it), whatever the config claims.
    lm_head_ = ckpt.has("lm_head.weight") ? ckpt.linear("lm_head", c.vocab_size, c.hidden_size, q) : embed_;
    ops::prepare_weight(lm_head_);
    AttentionShape shape{c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim};
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      Layer layer;
      layer.input_norm = ckpt.tensor(p + "input_layernorm.weight", {c.hidden_size});
      layer.post_norm = ckpt.tensor(p + "post_attention_layernorm.weight", {c.hidden_size});
      layer.attention = AttentionBlock(ckpt, p + "self_attn.", shape, options.qkv_bias, q);
      layer.mlp = MlpBlock(ckpt, p + "mlp.", c.hidden_size, c.intermediate_size, q);
      layers_.push_back(std::move(layer));
    }
    rope_ = ops::RopeTable(c.rope);
  }

  SequenceState new_state() const override {
    std::vector<KvCache> kv;
    for (size_t i = 0; i < layers_.size(); ++i) kv.emplace_back(config_.num_key_value_heads, config_.head_dim);
    return SequenceState(std::move(kv), std::vector<LinearAttentionState>(layers_.size()));
  }

  Tensor forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) override {
    const int64_t n = static_cast<int64_t>(tokens.size());
    check(n > 0, ErrorKind::invalid_argument, "forward: no tokens");
    const int64_t pos0 = state.length(), hidden = config_.hidden_size;
    positions_.resize(static_cast<size_t>(n));
    std::iota(positions_.begin(), positions_.end(), static_cast<int32_t>(pos0));

    Tensor h = ws_.get(kHidden, n, hidden);      // residual stream (n, hidden)
    Tensor x = ws_.get(kNormed, n, hidden);      // normalised input of each sub-block
    Tensor delta = ws_.get(kDelta, n, hidden);   // sub-block output
    ops::embedding(embed_, tokens, h);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& layer = layers_[i];
      KvCache& cache = state.kv(i);
      cache.reserve(pos0 + n);
      ops::rms_norm(h, layer.input_norm, eps(), x);
      layer.attention.forward(x, positions_, cache, rope_, ws_, delta);
      ops::add(h, delta, h);
      ops::rms_norm(h, layer.post_norm, eps(), x);
      layer.mlp.forward(x, ws_, delta);
      ops::add(h, delta, h);
    }
    state.advance(n);
    if (which == LogitsFor::none) return Tensor{};
    Tensor rows = which == LogitsFor::last ? h.slice(0, n - 1, n) : h;
    Tensor normed = x.slice(0, 0, rows.dim(0));
    ops::rms_norm(rows, norm_, eps(), normed);
    Tensor logits = ws_.get(kLogits, rows.dim(0), config_.vocab_size);
    ops::matmul(normed, lm_head_, logits);
    return logits;
  }

  size_t weight_bytes_per_token() const override {
    size_t b = lm_head_.nbytes() + norm_.nbytes();
    for (const auto& l : layers_) b += l.attention.weight_bytes() + l.mlp.weight_bytes() + l.input_norm.nbytes() + l.post_norm.nbytes();
    return b;
  }

 private:
  enum Slot : size_t { kHidden, kNormed, kDelta, kLogits };
  struct Layer {
    Tensor input_norm, post_norm;
    AttentionBlock attention;
    MlpBlock mlp;
  };
  float eps() const { return static_cast<float>(config_.rms_norm_eps); }

  Weight embed_, lm_head_;
  Tensor norm_;
  std::vector<Layer> layers_;
  ops::RopeTable rope_;
  Workspace ws_;
  std::vector<int32_t> positions_;
};

}  // namespace

std::unique_ptr<Model> make_qwen2(ModelConfig config, Checkpoint& checkpoint) {
  return std::make_unique<LlamaLikeModel>(std::move(config), checkpoint, LlamaLikeOptions{.qkv_bias = true});
}

std::unique_ptr<Model> make_mistral(ModelConfig config, Checkpoint& checkpoint) {
  return std::make_unique<LlamaLikeModel>(std::move(config), checkpoint, LlamaLikeOptions{.qkv_bias = false});
}

}  // namespace sanctum
