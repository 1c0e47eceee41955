// qwen2 and mistral: the dense Llama-style decoder. mixtral: the same with a routed MoE FFN.
#include "model/arch/llama_like.h"

#include "base/error.h"
#include "model/decoder.h"

namespace sanctum {

void fill_uniform_layers(ModelConfig& config, FfnKind ffn) {
  config.layers.assign(static_cast<size_t>(config.num_hidden_layers), LayerConfig{MixerKind::attention, ffn});
}

std::unique_ptr<Model> make_qwen2(ModelConfig config, Checkpoint& checkpoint) {
  fill_uniform_layers(config, FfnKind::dense);
  DecoderOptions o;
  o.qkv_bias = true;
  return make_decoder(std::move(config), checkpoint, o);
}

std::unique_ptr<Model> make_mistral(ModelConfig config, Checkpoint& checkpoint) {
  fill_uniform_layers(config, FfnKind::dense);
  return make_decoder(std::move(config), checkpoint, DecoderOptions{});
}

std::unique_ptr<Model> make_mixtral(ModelConfig config, Checkpoint& checkpoint) {
  fill_uniform_layers(config, FfnKind::moe);
  DecoderOptions o;
  o.moe_module = "block_sparse_moe.";
  o.moe.hidden = config.hidden_size;
  o.moe.expert_intermediate = config.require_int("intermediate_size");
  o.moe.n_experts = config.int_or("num_local_experts", config.num_experts);
  o.moe.top_k = config.int_or("num_experts_per_tok", 2);
  o.moe.routing = MoeConfig::Routing::top_k_then_softmax;
  check(o.moe.n_experts > 0, ErrorKind::invalid_input, config.dir + "/config.json: missing key 'num_local_experts'");
  return make_decoder(std::move(config), checkpoint, o);
}

}  // namespace sanctum
