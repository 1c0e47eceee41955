#include "weights/quant_config.h"

#include <gtest/gtest.h>

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
  }
}

QuantConfig parse(const char* text) { return QuantConfig::from_json(json::parse(text)); }

TEST(QuantConfig, absent_block_means_dense) {
  QuantConfig q = parse(R"({"model_type": "qwen2"})");
  EXPECT_FALSE(q.quantized());
  EXPECT_EQ(q.for_layer("model.layers.0.self_attn.q_proj").bits, 0);
  EXPECT_FALSE(parse(R"({"quantization": null})").quantized());
}

TEST(QuantConfig, defaults_and_per_layer_overrides) {
  // As mlx-lm writes it: both keys, overrides keyed by module path.
  QuantConfig q = parse(R"({
    "quantization": {"group_size": 64, "bits": 4, "mode": "affine",
                     "model.layers.0.mlp.gate": {"group_size": 64, "bits": 8},
                     "model.layers.1.mlp.shared_expert_gate": {"bits": 8},
                     "lm_head": {"group_size": 32, "bits": 8, "mode": "affine"},
                     "model.embed_tokens": false,
                     "model.layers.2.self_attn.o_proj": true},
    "quantization_config": {"group_size": 64, "bits": 4}})");
  ASSERT_TRUE(q.quantized());
  EXPECT_EQ(q.defaults.bits, 4);
  EXPECT_EQ(q.defaults.group_size, 64);
  QuantParams p = q.for_layer("model.layers.3.self_attn.q_proj");
  EXPECT_EQ(p.bits, 4);
  EXPECT_EQ(p.group_size, 64);
  EXPECT_EQ(q.for_layer("model.layers.0.mlp.gate").bits, 8);
  EXPECT_EQ(q.for_layer("model.layers.1.mlp.shared_expert_gate").bits, 8);
  EXPECT_EQ(q.for_layer("model.layers.1.mlp.shared_expert_gate").group_size, 64);  // inherits the default
  EXPECT_EQ(q.for_layer("lm_head").group_size, 32);
  EXPECT_EQ(q.for_layer("model.embed_tokens").bits, 0);
  EXPECT_EQ(q.for_layer("model.embed_tokens.weight").bits, 0);  // a tensor name resolves to its module
  EXPECT_EQ(q.for_layer("model.layers.2.self_attn.o_proj").bits, 4);
}

TEST(QuantConfig, quantization_config_alone_is_accepted) {
  QuantConfig q = parse(R"({"quantization_config": {"group_size": 128, "bits": 8}})");
  EXPECT_EQ(q.defaults.bits, 8);
  EXPECT_EQ(q.defaults.group_size, 128);
}

TEST(QuantConfig, unsupported_modes_bits_and_methods_are_refused) {
  expect_error([] { parse(R"({"quantization": {"group_size": 32, "bits": 4, "mode": "mxfp4"}})"); },
               {"config.json: quantization.mode 'mxfp4' is not supported"}, ErrorKind::unsupported);
  expect_error([] { parse(R"({"quantization": {"group_size": 64, "bits": 3}})"); }, {"quantization.bits = 3", "4 or 8"},
               ErrorKind::unsupported);
  expect_error([] { parse(R"({"quantization": {"group_size": 16, "bits": 4}})"); }, {"quantization.group_size = 16"},
               ErrorKind::unsupported);
  expect_error([] { parse(R"({"quantization": {"group_size": 64, "bits": 4, "lm_head": {"bits": 6}}})"); },
               {"quantization['lm_head'].bits = 6"}, ErrorKind::unsupported);
  expect_error([] { parse(R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})"); },
               {"quantization_config.quant_method 'fp8' is not supported"}, ErrorKind::unsupported);
}

TEST(QuantConfig, malformed_blocks_name_the_key) {
  expect_error([] { parse(R"({"quantization": 4})"); }, {"quantization must be an object"}, ErrorKind::invalid_input);
  expect_error([] { parse(R"({"quantization": {"group_size": "64", "bits": 4}})"); }, {"quantization.group_size must be an integer"},
               ErrorKind::invalid_input);
  expect_error([] { parse(R"({"quantization": {"group_size": 64, "bits": -4}})"); }, {"quantization.bits", "out of range"},
               ErrorKind::invalid_input);
  expect_error([] { parse(R"({"quantization": {"group_size": 64, "bits": 4, "lm_head": 8}})"); },
               {"quantization['lm_head'] must be false or an object"}, ErrorKind::invalid_input);
  expect_error([] { parse(R"({"quantization": {}})"); }, {"neither 'bits' nor 'group_size'"}, ErrorKind::invalid_input);
  expect_error([] { parse(R"({"quantization": {"group_size": 64, "bits": 4, "mode": 1}})"); }, {"quantization.mode must be a string"},
               ErrorKind::invalid_input);
}

}  // namespace
}  // namespace sanctum
