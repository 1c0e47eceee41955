#include "model/decoder.h"

#include <numeric>
#include <vector>

#include "base/error.h"
#include "model/blocks/attention.h"
#include "model/blocks/gated_attention.h"
#include "model/blocks/mlp.h"
#include "model/blocks/workspace.h"
#include "ops/ops.h"

namespace sanctum {

namespace {

class DecoderModel final : public Model {
 public:
  DecoderModel(ModelConfig config, Checkpoint& ckpt, const DecoderOptions& options) : Model(std::move(config)), options_(options) {
    const ModelConfig& c = config_;
    check(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, ErrorKind::invalid_input,
          c.dir + "/config.json: num_attention_heads must be a multiple of num_key_value_heads");
    check(!c.bool_or("rope_traditional", false), ErrorKind::unsupported,
          c.dir + "/config.json: rope_traditional=true (interleaved RoPE) is not supported");
    check(static_cast<int64_t>(c.layers.size()) == c.num_hidden_layers, ErrorKind::internal, "layer configs missing");
    const QuantConfig& q = c.quant;
    const std::string& p = options.prefix;
    embed_ = ckpt.linear(p + "embed_tokens", c.vocab_size, c.hidden_size, q);
    final_norm_ = ckpt.tensor(p + "norm.weight", {c.hidden_size});
    // Tied when the checkpoint has no lm_head (mlx-lm drops it), whatever the config claims.
    lm_head_ = ckpt.has(options.lm_head + ".weight") ? ckpt.linear(options.lm_head, c.vocab_size, c.hidden_size, q) : embed_;
    ops::prepare_weight(lm_head_);

    const AttentionShape attn{c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim};
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const std::string lp = p + "layers." + std::to_string(i) + ".";
      const LayerConfig& lc = c.layers[static_cast<size_t>(i)];
      Layer layer;
      layer.config = lc;
      layer.input_norm = ckpt.tensor(lp + "input_layernorm.weight", {c.hidden_size});
      layer.post_norm = ckpt.tensor(lp + "post_attention_layernorm.weight", {c.hidden_size});
      if (lc.mixer == MixerKind::gated_delta_net) {
        layer.gdn = std::make_unique<GatedDeltaNetBlock>(ckpt, lp + "linear_attn.", options.gdn, eps(), q);
      } else if (options.gated_attention) {
        layer.gated_attention = std::make_unique<GatedAttentionBlock>(ckpt, lp + "self_attn.", attn, eps(), options.norm_offset, q);
      } else {
        layer.attention = std::make_unique<AttentionBlock>(ckpt, lp + "self_attn.", attn, options.qkv_bias, q);
      }
      if (lc.ffn == FfnKind::moe) {
        layer.moe = std::make_unique<MoeBlock>(ckpt, lp + options.moe_module, options.moe, q);
      } else {
        check(c.intermediate_size > 0, ErrorKind::invalid_input, c.dir + "/config.json: missing key 'intermediate_size'");
        layer.mlp = std::make_unique<MlpBlock>(ckpt, lp + "mlp.", c.hidden_size, c.intermediate_size, q);
      }
      layers_.push_back(std::move(layer));
    }
    rope_ = ops::RopeTable(c.rope);
    ws_ = Workspace(c.device);
  }

  SequenceState new_state() const override {
    std::vector<KvCache> kv(layers_.size());
    std::vector<LinearAttentionState> linear(layers_.size());
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (layers_[i].gdn) linear[i] = layers_[i].gdn->new_state(config_.device);
      else kv[i] = KvCache(config_.num_key_value_heads, config_.head_dim, config_.device);
    }
    return SequenceState(std::move(kv), std::move(linear));
  }

  Tensor forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) override {
    const int64_t n = static_cast<int64_t>(tokens.size());
    check(n > 0, ErrorKind::invalid_argument, "forward: no tokens");
    const int64_t pos0 = state.length(), hidden = config_.hidden_size;
    positions_.resize(static_cast<size_t>(n));
    std::iota(positions_.begin(), positions_.end(), static_cast<int32_t>(pos0));

    Tensor h = ws_.get(kHidden, n, hidden);     // residual stream (n, hidden)
    Tensor x = ws_.get(kNormed, n, hidden);     // normalised input of each sub-block
    Tensor delta = ws_.get(kDelta, n, hidden);  // sub-block output
    ops::embedding(embed_, tokens, h);
    const float off = options_.norm_offset;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& layer = layers_[i];
      ops::rms_norm(h, layer.input_norm, eps(), x, off);
      if (layer.gdn) {
        layer.gdn->forward(x, state.linear(i), pos0, ws_, delta);
      } else {
        KvCache& cache = state.kv(i);
        cache.reserve(pos0 + n);
        if (layer.gated_attention) layer.gated_attention->forward(x, positions_, cache, rope_, ws_, delta);
        else layer.attention->forward(x, positions_, cache, rope_, ws_, delta);
      }
      ops::add(h, delta, h);
      ops::rms_norm(h, layer.post_norm, eps(), x, off);
      if (layer.moe) layer.moe->forward(x, ws_, delta);
      else layer.mlp->forward(x, ws_, delta);
      ops::add(h, delta, h);
    }
    state.advance(n);
    if (which == LogitsFor::none) return Tensor{};
    Tensor rows = which == LogitsFor::last ? h.slice(0, n - 1, n) : h;
    Tensor normed = x.slice(0, 0, rows.dim(0));
    ops::rms_norm(rows, final_norm_, eps(), normed, off);
    Tensor logits = ws_.get(kLogits, rows.dim(0), config_.vocab_size);
    ops::matmul(normed, lm_head_, logits);
    if (logits.device() == Device::cpu) return logits;
    Tensor host = ws_.host(kLogits, rows.dim(0), config_.vocab_size);
    host.copy_from(logits);  // waits for the step to finish
    return host;
  }

  size_t weight_bytes_per_token() const override {
    size_t b = lm_head_.nbytes() + final_norm_.nbytes();
    for (const auto& l : layers_) {
      b += l.input_norm.nbytes() + l.post_norm.nbytes();
      if (l.gdn) b += l.gdn->weight_bytes();
      if (l.attention) b += l.attention->weight_bytes();
      if (l.gated_attention) b += l.gated_attention->weight_bytes();
      if (l.mlp) b += l.mlp->weight_bytes();
      if (l.moe) b += l.moe->weight_bytes_per_token();
    }
    return b;
  }

 private:
  enum Slot : size_t { kHidden, kNormed, kDelta, kLogits };
  struct Layer {
    LayerConfig config;
    Tensor input_norm, post_norm;
    std::unique_ptr<AttentionBlock> attention;
    std::unique_ptr<GatedAttentionBlock> gated_attention;
    std::unique_ptr<GatedDeltaNetBlock> gdn;
    std::unique_ptr<MlpBlock> mlp;
    std::unique_ptr<MoeBlock> moe;
  };
  float eps() const { return static_cast<float>(config_.rms_norm_eps); }

  DecoderOptions options_;
  Weight embed_, lm_head_;
  Tensor final_norm_;
  std::vector<Layer> layers_;
  ops::RopeTable rope_;
  Workspace ws_;
  std::vector<int32_t> positions_;
};

}  // namespace

std::unique_ptr<Model> make_decoder(ModelConfig config, Checkpoint& checkpoint, const DecoderOptions& options) {
  return std::make_unique<DecoderModel>(std::move(config), checkpoint, options);
}

}  // namespace sanctum
