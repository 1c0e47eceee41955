#include "model/config.h"

#include <gtest/gtest.h>

#include "../weights/safetensors_writer.h"
#include "base/error.h"

namespace sanctum {
namespace {

using nlohmann::json;

template <class F>
void expect_error(F&& f, std::initializer_list<std::string> fragments, ErrorKind kind) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning " << *fragments.begin();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.kind(), kind) << msg;
    for (const auto& frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "errors are one line: " << msg;
  }
}

json qwen2() {
  return json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
    "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": true,
    "bos_token_id": 151643, "eos_token_id": 151645, "sliding_window": 32768, "use_sliding_window": false,
    "rope_scaling": null, "torch_dtype": "bfloat16"})");
}

ModelConfig parse(const json& config, const std::string& gen = "") { return parse_model_config(config.dump(), gen); }

TEST(ModelConfig, qwen2_classic_fields) {
  ModelConfig c = parse(qwen2());
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);  // hidden / heads
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope.type, ops::RopeConfig::Type::standard);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.rope.head_dim, 64);
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_TRUE(c.mrope_section.empty());
  ASSERT_EQ(c.layers.size(), 24u);
  for (const auto& l : c.layers) {
    EXPECT_EQ(l.mixer, MixerKind::attention);
    EXPECT_EQ(l.ffn, FfnKind::dense);
  }
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_FALSE(c.quant.quantized());
}

TEST(ModelConfig, kv_heads_default_to_attention_heads_and_head_dim_may_be_explicit) {
  json j = qwen2();
  j.erase("num_key_value_heads");
  j["model_type"] = "mistral";
  j["head_dim"] = 128;  // Devstral: head_dim != hidden / heads
  ModelConfig c = parse(j);
  EXPECT_EQ(c.num_key_value_heads, 14);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope.rotary_dim, 128);
  j["head_dim"] = nullptr;  // null reads as absent
  EXPECT_EQ(parse(j).head_dim, 64);
}

TEST(ModelConfig, yarn_in_classic_rope_scaling) {
  json j = qwen2();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}, {"beta_fast", 16}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.rope.type, ops::RopeConfig::Type::yarn);
  EXPECT_DOUBLE_EQ(c.rope.factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position, 32768);
  EXPECT_DOUBLE_EQ(c.rope.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(c.rope.beta_slow, 1.0);
  EXPECT_DOUBLE_EQ(c.rope.mscale, 1.0);
  EXPECT_DOUBLE_EQ(c.rope.attention_factor, 0.0);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);

  // rope_type spelling, attention_factor and mscale fields; original max falls back to max_position_embeddings.
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2},           {"attention_factor", 1.2},
                       {"mscale", 0.707},     {"mscale_all_dim", 1.0}, {"beta_slow", 2}};
  c = parse(j);
  EXPECT_EQ(c.rope.type, ops::RopeConfig::Type::yarn);
  EXPECT_DOUBLE_EQ(c.rope.factor, 2.0);
  EXPECT_EQ(c.rope.original_max_position, 32768);
  EXPECT_DOUBLE_EQ(c.rope.attention_factor, 1.2);
  EXPECT_DOUBLE_EQ(c.rope.mscale, 0.707);
  EXPECT_DOUBLE_EQ(c.rope.mscale_all_dim, 1.0);
  EXPECT_DOUBLE_EQ(c.rope.beta_slow, 2.0);
}

TEST(ModelConfig, linear_and_llama3_scaling) {
  json j = qwen2();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 8.0}};
  EXPECT_EQ(parse(j).rope.type, ops::RopeConfig::Type::linear);
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.rope.type, ops::RopeConfig::Type::llama3);
  EXPECT_EQ(c.rope.original_max_position, 8192);
  EXPECT_DOUBLE_EQ(c.rope.high_freq_factor, 4.0);
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  expect_error([&] { parse(j); }, {"config.json", "RoPE type 'dynamic' is not supported"}, ErrorKind::unsupported);
}

TEST(ModelConfig, transformers5_rope_parameters) {
  json j = qwen2();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 500000.0}, {"factor", 4.0}, {"original_max_position_embeddings", 4096}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.rope.type, ops::RopeConfig::Type::yarn);
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rope.factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position, 4096);
  // rope_parameters wins over the classic keys.
  j["rope_theta"] = 1.0e4;
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  c = parse(j);
  EXPECT_EQ(c.rope.type, ops::RopeConfig::Type::yarn);
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
}

json qwen3_5_text() {
  return json::parse(R"({
    "model_type": "qwen3_5_text", "hidden_size": 1024, "intermediate_size": 3584, "num_hidden_layers": 8,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 248320,
    "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4, "max_position_embeddings": 262144, "eos_token_id": 248044,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": true}})");
}

TEST(ModelConfig, partial_rotary_and_mrope_from_rope_parameters) {
  ModelConfig c = parse(qwen3_5_text());
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_EQ(c.rope.head_dim, 256);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e7);
  EXPECT_EQ(c.mrope_section, (std::vector<int>{11, 11, 10}));
  EXPECT_TRUE(c.mrope_interleaved);
  EXPECT_EQ(c.linear_num_value_heads, 16);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
}

TEST(ModelConfig, classic_partial_rotary_factor_and_family_default) {
  json j = qwen2();
  j["partial_rotary_factor"] = 0.5;
  EXPECT_EQ(parse(j).rope.rotary_dim, 32);
  // qwen3_5 configs that leave it out rotate a quarter of each head, as transformers defaults it.
  json q = qwen3_5_text();
  q["rope_parameters"].erase("partial_rotary_factor");
  EXPECT_EQ(parse(q).rope.rotary_dim, 64);
  // mlx-lm's default mrope_section rides along even when it exceeds a tiny model's rotary half.
  q["head_dim"] = 64;
  EXPECT_EQ(parse(q).rope.rotary_dim, 16);
  EXPECT_EQ(parse(q).mrope_section, (std::vector<int>{11, 11, 10}));
  j["partial_rotary_factor"] = 1.5;
  expect_error([&] { parse(j); }, {"partial_rotary_factor"}, ErrorKind::invalid_input);
}

TEST(ModelConfig, qwen3_5_full_attention_interval_without_layer_types) {
  json j = qwen3_5_text();
  ModelConfig c = parse(j);
  ASSERT_EQ(c.layers.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(c.layers[i].mixer, (i + 1) % 4 == 0 ? MixerKind::attention : MixerKind::gated_delta_net) << i;
  }
  j["full_attention_interval"] = 2;
  c = parse(j);
  EXPECT_EQ(c.layers[0].mixer, MixerKind::gated_delta_net);
  EXPECT_EQ(c.layers[1].mixer, MixerKind::attention);
  j["full_attention_interval"] = 0;
  expect_error([&] { parse(j); }, {"full_attention_interval"}, ErrorKind::invalid_input);
}

TEST(ModelConfig, layer_types_decide_the_mixer) {
  json j = qwen3_5_text();
  j["num_hidden_layers"] = 3;
  j["layer_types"] = {"full_attention", "linear_attention", "linear_attention"};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.layers[0].mixer, MixerKind::attention);
  EXPECT_EQ(c.layers[1].mixer, MixerKind::gated_delta_net);
  j["layer_types"] = {"full_attention"};
  expect_error([&] { parse(j); }, {"layer_types has 1 entries for num_hidden_layers = 3"}, ErrorKind::invalid_input);
  j["layer_types"] = {"full_attention", "mamba", "full_attention"};
  expect_error([&] { parse(j); }, {"layer_types[1] = 'mamba'"}, ErrorKind::unsupported);
  // qwen2 in transformers 5 writes layer_types too.
  json q = qwen2();
  q["num_hidden_layers"] = 2;
  q["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_EQ(parse(q).layers[1].mixer, MixerKind::attention);
}

TEST(ModelConfig, moe_layers_honour_mlp_only_layers_and_sparse_step) {
  json j = qwen3_5_text();
  j["model_type"] = "qwen3_5_moe_text";
  j["num_experts"] = 16;
  j["num_experts_per_tok"] = 4;
  j["moe_intermediate_size"] = 256;
  j["shared_expert_intermediate_size"] = 512;
  ModelConfig c = parse(j);
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c.norm_topk_prob);
  for (const auto& l : c.layers) EXPECT_EQ(l.ffn, FfnKind::moe);
  j["mlp_only_layers"] = {0, 5};
  j["decoder_sparse_step"] = 2;
  c = parse(j);
  std::vector<FfnKind> want = {FfnKind::dense, FfnKind::moe,   FfnKind::dense, FfnKind::moe,
                               FfnKind::dense, FfnKind::dense, FfnKind::dense, FfnKind::moe};
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(c.layers[i].ffn, want[i]) << i;
  // Mixtral names the expert count num_local_experts.
  json m = qwen2();
  m["model_type"] = "mixtral";
  m["num_local_experts"] = 8;
  m["num_experts_per_tok"] = 2;
  c = parse(m);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.layers[0].ffn, FfnKind::moe);
  EXPECT_EQ(c.layers[0].mixer, MixerKind::attention);
}

TEST(ModelConfig, vl_text_config_is_flattened_with_root_winning) {
  json text = qwen3_5_text();
  text["tie_word_embeddings"] = true;
  text["vocab_size"] = 1000;
  json root = {{"model_type", "qwen3_5"},      {"architectures", {"Qwen3_5ForConditionalGeneration"}},
               {"text_config", text},          {"vision_config", {{"depth", 2}, {"hidden_size", 64}}},
               {"tie_word_embeddings", false}, {"vocab_size", nullptr},  // null at the root does not hide the nested value
               {"image_token_id", 248056}};
  ModelConfig c = parse(root);
  EXPECT_EQ(c.model_type, "qwen3_5");  // root wins over text_config's qwen3_5_text
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.vocab_size, 1000);
  EXPECT_EQ(c.hidden_size, 1024);  // the vision tower's hidden_size stays nested
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_EQ(c.layers[3].mixer, MixerKind::attention);
  EXPECT_EQ(c.raw["image_token_id"], 248056);
}

TEST(ModelConfig, eos_is_the_union_of_config_and_generation_config) {
  json j = qwen2();
  j["eos_token_id"] = {151645, 151643};
  ModelConfig c = parse(j, R"({"bos_token_id": 1, "eos_token_id": [151643, 151644], "do_sample": true})");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643, 151644}));
  EXPECT_EQ(c.bos_token_id, 151643);  // config.json wins
  j.erase("eos_token_id");
  j.erase("bos_token_id");
  c = parse(j, R"({"bos_token_id": 1, "eos_token_id": 7})");
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{7});
  EXPECT_EQ(c.bos_token_id, 1);
  expect_error([&] { parse(j, R"({"eos_token_id": "x"})"); }, {"generation_config.json", "eos_token_id"}, ErrorKind::invalid_input);
  expect_error([&] { parse(j, "{broken"); }, {"generation_config.json", "not valid JSON"}, ErrorKind::invalid_input);
}

TEST(ModelConfig, missing_required_keys_are_named) {
  for (const char* key : {"model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"}) {
    json j = qwen2();
    j.erase(key);
    expect_error([&] { parse(j); }, {std::string("config.json: missing key '") + key + "'"}, ErrorKind::not_found);
  }
}

TEST(ModelConfig, wrong_types_name_the_key_and_the_expected_type) {
  auto with = [](const char* key, json v) {
    json j = qwen2();
    j[key] = std::move(v);
    return j;
  };
  expect_error([&] { parse(with("hidden_size", "896")); }, {"key 'hidden_size' must be an integer, got string"}, ErrorKind::invalid_input);
  expect_error([&] { parse(with("hidden_size", 896.5)); }, {"key 'hidden_size' must be an integer"}, ErrorKind::invalid_input);
  expect_error([&] { parse(with("model_type", 3)); }, {"key 'model_type' must be a string, got number"}, ErrorKind::invalid_input);
  expect_error([&] { parse(with("tie_word_embeddings", "yes")); }, {"key 'tie_word_embeddings' must be a boolean"},
               ErrorKind::invalid_input);
  expect_error([&] { parse(with("rms_norm_eps", json::array())); }, {"key 'rms_norm_eps' must be a number, got array"},
               ErrorKind::invalid_input);
  expect_error([&] { parse(with("rope_scaling", "yarn")); }, {"key 'rope_scaling' must be an object"}, ErrorKind::invalid_input);
  expect_error(
      [&] {
        parse(with("rope_scaling", {{"type", "yarn"}, {"factor", "4"}}));
      },
      {"rope_scaling", "key 'factor' must be a number"}, ErrorKind::invalid_input);
  expect_error([&] { parse(with("eos_token_id", {1, "2"})); }, {"key 'eos_token_id' must be a list of integers"}, ErrorKind::invalid_input);
  expect_error([&] { parse(with("text_config", 5)); }, {"key 'text_config' must be an object"}, ErrorKind::invalid_input);
  expect_error([&] { parse(with("layer_types", "full_attention")); }, {"key 'layer_types' must be a list of strings"},
               ErrorKind::invalid_input);
  expect_error([&] { parse(with("num_hidden_layers", -1)); }, {"num_hidden_layers", "out of range"}, ErrorKind::invalid_input);
  expect_error([&] { parse(with("num_key_value_heads", 3)); }, {"num_key_value_heads"}, ErrorKind::invalid_input);
  expect_error([&] { parse_model_config("[1, 2]", ""); }, {"config.json: not a JSON object"}, ErrorKind::invalid_input);
  expect_error([&] { parse_model_config("{", ""); }, {"config.json: not valid JSON"}, ErrorKind::invalid_input);
  // An integer written as a float is accepted.
  EXPECT_EQ(parse(with("hidden_size", 896.0)).hidden_size, 896);
}

TEST(ModelConfig, typed_accessors_name_the_key) {
  ModelConfig c = parse(qwen2());
  EXPECT_EQ(c.require_int("sliding_window"), 32768);
  EXPECT_EQ(c.int_or("absent", 5), 5);
  EXPECT_FALSE(c.bool_or("use_sliding_window", true));
  EXPECT_DOUBLE_EQ(c.double_or("rope_theta", 0), 1e6);
  expect_error([&] { c.require_int("absent_key"); }, {"config.json: missing key 'absent_key'"}, ErrorKind::not_found);
  expect_error([&] { c.int_or("torch_dtype", 0); }, {"key 'torch_dtype' must be an integer"}, ErrorKind::invalid_input);
}

TEST(ModelConfig, quantization_block_is_parsed) {
  json j = qwen2();
  j["quantization"] = {{"group_size", 64}, {"bits", 4}, {"model.layers.0.mlp.gate", {{"group_size", 64}, {"bits", 8}}}, {"lm_head", false}};
  j["quantization_config"] = j["quantization"];
  ModelConfig c = parse(j);
  EXPECT_TRUE(c.quant.quantized());
  EXPECT_EQ(c.quant.for_layer("model.layers.0.self_attn.q_proj").bits, 4);
  EXPECT_EQ(c.quant.for_layer("model.layers.0.mlp.gate").bits, 8);
  EXPECT_EQ(c.quant.for_layer("lm_head").bits, 0);
}

TEST(ModelConfig, load_reads_both_files_from_a_directory) {
  testing::TempDir dir;
  testing::write_bytes(dir.path / "config.json", qwen2().dump());
  testing::write_bytes(dir.path / "generation_config.json", R"({"eos_token_id": [151643]})");
  ModelConfig c = load_model_config(dir.str());
  EXPECT_EQ(c.dir, dir.str());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  json bad = qwen2();
  bad.erase("vocab_size");
  testing::write_bytes(dir.path / "config.json", bad.dump());
  expect_error([&] { load_model_config(dir.str()); }, {"config.json: missing key 'vocab_size'", dir.str()}, ErrorKind::not_found);
  expect_error([&] { load_model_config(dir.file("nowhere")); }, {"config.json", "not found"}, ErrorKind::not_found);
}

TEST(ModelConfig, sliding_windows_cap_the_context_where_a_layer_slides) {
  ModelConfig plain = parse(qwen2());  // use_sliding_window false: nothing slides
  EXPECT_EQ(plain.attention_window, 0);
  EXPECT_EQ(plain.context_limit(), 32768);
  json q = qwen2();
  q["use_sliding_window"] = true;
  q["max_window_layers"] = 24;  // every layer below it is full attention: still nothing slides
  EXPECT_EQ(parse(q).attention_window, 0);
  q["max_window_layers"] = 20;
  q["sliding_window"] = 4096;
  EXPECT_EQ(parse(q).attention_window, 4096);
  EXPECT_EQ(parse(q).context_limit(), 4096);

  json mistral = qwen2();
  mistral["model_type"] = "mistral";
  mistral.erase("use_sliding_window");
  mistral["sliding_window"] = nullptr;  // recent Mistral checkpoints
  EXPECT_EQ(parse(mistral).attention_window, 0);
  mistral["sliding_window"] = 4096;  // Mistral-7B-v0.1
  EXPECT_EQ(parse(mistral).context_limit(), 4096);
  mistral["sliding_window"] = 65536;  // wider than the context: the context stays
  EXPECT_EQ(parse(mistral).context_limit(), 32768);

  json typed = qwen2();
  typed["model_type"] = "qwen3";
  typed["layer_types"] = json::array();
  for (int i = 0; i < 24; ++i) typed["layer_types"].push_back(i % 2 ? "sliding_attention" : "full_attention");
  typed["sliding_window"] = 128;
  EXPECT_EQ(parse(typed).attention_window, 128);

  mistral["sliding_window"] = "wide";
  expect_error([&] { parse(mistral); }, {"sliding_window", "positive integer"}, ErrorKind::invalid_input);
}

}  // namespace
}  // namespace sanctum
