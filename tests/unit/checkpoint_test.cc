#include "weights/checkpoint.h"

#include <gtest/gtest.h>

#include "../weights/safetensors_writer.h"
#include "base/error.h"

namespace sanctum {
namespace {

using testing::bytes_of;
using testing::f32_tensor;
using testing::make_safetensors;
using testing::StTensor;
using testing::TempDir;
using testing::write_bytes;

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

void write_index(const TempDir& dir, const nlohmann::json& weight_map) {
  write_bytes(dir.path / "model.safetensors.index.json",
              nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
}

// An MLX affine-quantized linear (rows, cols) at `prefix`: packed u32 weight, bf16 scales and biases.
std::vector<StTensor> quantized_linear(const std::string& prefix, int64_t rows, int64_t cols, int bits, int group) {
  std::vector<uint32_t> packed(static_cast<size_t>(rows * cols * bits / 32), 0x12345678u);
  std::vector<uint16_t> scales(static_cast<size_t>(rows * cols / group), f32_to_bf16(0.5f));
  return {{prefix + ".weight", "U32", {rows, cols * bits / 32}, bytes_of(packed)},
          {prefix + ".scales", "BF16", {rows, cols / group}, bytes_of(scales)},
          {prefix + ".biases", "BF16", {rows, cols / group}, bytes_of(scales)}};
}

TEST(Checkpoint, single_file_tensors_are_views_and_usage_is_tracked) {
  TempDir dir;
  write_bytes(dir.path / "model.safetensors", make_safetensors({f32_tensor("a", {2, 3}), f32_tensor("b", {4})}));
  Checkpoint ckpt(dir.str());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(ckpt.has("a"));
  EXPECT_FALSE(ckpt.has("c"));
  EXPECT_EQ(ckpt.entry("b").shape, std::vector<int64_t>{4});
  EXPECT_EQ(ckpt.unused().size(), 2u);  // entry() does not count as use
  Tensor a = ckpt.tensor("a", {2, 3});
  EXPECT_EQ(a.data<float>()[4], 4.0f);
  EXPECT_EQ(ckpt.unused(), std::vector<std::string>{"b"});
  EXPECT_GT(ckpt.file_bytes(), 40u);
}

TEST(Checkpoint, sharded_index_loads_every_shard) {
  TempDir dir;
  write_bytes(dir.path / "model-00001-of-00002.safetensors", make_safetensors({f32_tensor("x.weight", {2, 2})}));
  write_bytes(dir.path / "model-00002-of-00002.safetensors", make_safetensors({f32_tensor("y.weight", {3})}));
  write_index(dir, {{"x.weight", "model-00001-of-00002.safetensors"}, {"y.weight", "model-00002-of-00002.safetensors"}});
  // A stray file that the index does not name is not loaded.
  write_bytes(dir.path / "stray.safetensors", make_safetensors({f32_tensor("z", {1})}));
  Checkpoint ckpt(dir.str());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"x.weight", "y.weight"}));
  EXPECT_EQ(ckpt.tensor("y.weight", {3}).data<float>()[2], 2.0f);
  EXPECT_EQ(ckpt.tensor("x.weight").data<float>()[3], 3.0f);
  ckpt.check_all_used();
}

TEST(Checkpoint, without_index_or_model_file_all_safetensors_load_sorted) {
  TempDir dir;
  write_bytes(dir.path / "b.safetensors", make_safetensors({f32_tensor("two", {1})}));
  write_bytes(dir.path / "a.safetensors", make_safetensors({f32_tensor("one", {1})}));
  Checkpoint ckpt(dir.str());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"one", "two"}));
}

TEST(Checkpoint, empty_or_missing_directory_is_not_found) {
  TempDir dir;
  expect_error([&] { Checkpoint c(dir.str()); }, {dir.str(), "no safetensors"}, ErrorKind::not_found);
  expect_error([&] { Checkpoint c(dir.file("absent")); }, {"absent", "not found"}, ErrorKind::not_found);
}

TEST(Checkpoint, missing_shard_is_named) {
  TempDir dir;
  write_bytes(dir.path / "model-00001-of-00002.safetensors", make_safetensors({f32_tensor("x", {1})}));
  write_index(dir, {{"x", "model-00001-of-00002.safetensors"}, {"y", "model-00002-of-00002.safetensors"}});
  expect_error([&] { Checkpoint c(dir.str()); }, {"shard 'model-00002-of-00002.safetensors'", "tensor 'y'", "missing"},
               ErrorKind::not_found);
}

TEST(Checkpoint, tensor_listed_in_index_but_absent_from_its_shard_is_an_error) {
  TempDir dir;
  write_bytes(dir.path / "s1.safetensors", make_safetensors({f32_tensor("x", {1})}));
  write_bytes(dir.path / "s2.safetensors", make_safetensors({f32_tensor("y", {1})}));
  write_index(dir, {{"x", "s1.safetensors"}, {"y", "s2.safetensors"}, {"ghost", "s1.safetensors"}});
  expect_error([&] { Checkpoint c(dir.str()); }, {"tensor 'ghost'", "s1.safetensors", "does not hold it"}, ErrorKind::invalid_input);
  // Listed in the wrong shard.
  write_index(dir, {{"x", "s2.safetensors"}, {"y", "s2.safetensors"}});
  expect_error([&] { Checkpoint c(dir.str()); }, {"tensor 'x'", "s2.safetensors"}, ErrorKind::invalid_input);
}

TEST(Checkpoint, index_that_is_not_json_or_escapes_the_directory_is_rejected) {
  TempDir dir;
  write_bytes(dir.path / "model.safetensors.index.json", "{oops");
  expect_error([&] { Checkpoint c(dir.str()); }, {"model.safetensors.index.json", "not valid JSON"}, ErrorKind::invalid_input);
  write_index(dir, {{"x", "../elsewhere.safetensors"}});
  expect_error([&] { Checkpoint c(dir.str()); }, {"weight_map['x']", "not a file name"}, ErrorKind::invalid_input);
  write_bytes(dir.path / "model.safetensors.index.json", R"({"metadata": {}})");
  expect_error([&] { Checkpoint c(dir.str()); }, {"weight_map"}, ErrorKind::invalid_input);
}

TEST(Checkpoint, duplicate_tensor_names_across_shards_are_rejected) {
  TempDir dir;
  write_bytes(dir.path / "a.safetensors", make_safetensors({f32_tensor("dup", {1}), f32_tensor("x", {1})}));
  write_bytes(dir.path / "b.safetensors", make_safetensors({f32_tensor("dup", {2})}));
  expect_error([&] { Checkpoint c(dir.str()); }, {"tensor 'dup'", "a.safetensors", "b.safetensors"}, ErrorKind::invalid_input);
}

TEST(Checkpoint, requesting_a_missing_tensor_names_it) {
  TempDir dir;
  write_bytes(dir.path / "model.safetensors", make_safetensors({f32_tensor("a", {1})}));
  Checkpoint ckpt(dir.str());
  expect_error([&] { ckpt.tensor("model.layers.0.self_attn.q_proj.weight"); },
               {dir.str(), "tensor 'model.layers.0.self_attn.q_proj.weight' not found"}, ErrorKind::not_found);
  expect_error([&] { ckpt.linear("lm_head", 2, 2, QuantConfig{}); }, {"lm_head.weight", "not found"}, ErrorKind::not_found);
}

TEST(Checkpoint, shape_mismatch_names_tensor_and_both_shapes) {
  TempDir dir;
  write_bytes(dir.path / "model.safetensors", make_safetensors({f32_tensor("model.norm.weight", {8})}));
  Checkpoint ckpt(dir.str());
  expect_error([&] { ckpt.tensor("model.norm.weight", {16}); },
               {"model.safetensors", "tensor 'model.norm.weight': expected (16,), got (8,) f32"}, ErrorKind::invalid_input);
  expect_error([&] { ckpt.tensor("model.norm.weight", {8, 1}); }, {"expected (8, 1)"}, ErrorKind::invalid_input);
  expect_error([&] { ckpt.linear("model.norm", 8, 1, QuantConfig{}); }, {"model.norm.weight"}, ErrorKind::invalid_input);
}

TEST(Checkpoint, dense_linear_checks_shape_and_float_dtype) {
  TempDir dir;
  write_bytes(dir.path / "model.safetensors",
              make_safetensors({f32_tensor("proj.weight", {3, 4}), {"ids.weight", "I32", {1, 1}, bytes_of(std::vector<int32_t>{1})}}));
  Checkpoint ckpt(dir.str());
  Weight w = ckpt.linear("proj", 3, 4, QuantConfig{});
  EXPECT_FALSE(w.quantized());
  EXPECT_EQ(w.rows, 3);
  EXPECT_EQ(w.cols, 4);
  EXPECT_EQ(w.name, "proj");
  EXPECT_EQ(w.data.data<float>()[11], 11.0f);
  expect_error([&] { ckpt.linear("ids", 1, 1, QuantConfig{}); }, {"ids.weight", "dense weights must be f32, bf16 or f16"},
               ErrorKind::unsupported);
}

TEST(Checkpoint, quantized_linear_uses_per_layer_bits_and_checks_packed_shape) {
  TempDir dir;
  std::vector<StTensor> ts;
  for (auto& t : quantized_linear("model.layers.0.mlp.up_proj", 8, 128, 4, 64)) ts.push_back(t);
  for (auto& t : quantized_linear("model.layers.0.mlp.gate", 4, 128, 8, 64)) ts.push_back(t);
  for (auto& t : quantized_linear("bad_bits", 8, 128, 8, 64)) ts.push_back(t);
  ts.push_back({"no_biases.weight", "U32", {8, 16}, bytes_of(std::vector<uint32_t>(128))});
  ts.push_back({"no_biases.scales", "BF16", {8, 2}, bytes_of(std::vector<uint16_t>(16))});
  ts.push_back(f32_tensor("model.embed_tokens.weight", {2, 2}));
  write_bytes(dir.path / "model.safetensors", make_safetensors(ts));
  Checkpoint ckpt(dir.str());
  QuantConfig q = QuantConfig::from_json(nlohmann::json::parse(
      R"({"quantization": {"group_size": 64, "bits": 4, "model.layers.0.mlp.gate": {"group_size": 64, "bits": 8},
                           "model.embed_tokens": false}})"));

  Weight up = ckpt.linear("model.layers.0.mlp.up_proj", 8, 128, q);
  EXPECT_TRUE(up.quantized());
  EXPECT_EQ(up.quant.bits, 4);
  EXPECT_EQ(up.quant.group_size, 64);
  EXPECT_EQ(up.data.dim(1), 16);
  EXPECT_EQ(up.scales.dim(1), 2);
  Weight gate = ckpt.linear("model.layers.0.mlp.gate", 4, 128, q);
  EXPECT_EQ(gate.quant.bits, 8);
  EXPECT_EQ(gate.data.dim(1), 32);
  EXPECT_FALSE(ckpt.linear("model.embed_tokens", 2, 2, q).quantized());

  // Packed as 8-bit while the config says 4-bit.
  expect_error([&] { ckpt.linear("bad_bits", 8, 128, q); },
               {"tensor 'bad_bits.weight': expected packed (8, 16) u32 for (8, 128) at 4 bits, got (8, 32) u32"}, ErrorKind::invalid_input);
  // Wrong logical shape requested.
  expect_error([&] { ckpt.linear("model.layers.0.mlp.up_proj", 8, 256, q); }, {"up_proj.weight", "expected packed (8, 32)"},
               ErrorKind::invalid_input);
  expect_error([&] { ckpt.linear("no_biases", 8, 128, q); }, {"no_biases.biases"}, ErrorKind::not_found);
  // Scales present but the config has no quantization block.
  expect_error([&] { ckpt.linear("model.layers.0.mlp.up_proj", 8, 128, QuantConfig{}); },
               {"model.layers.0.mlp.up_proj.scales", "does not quantize"}, ErrorKind::invalid_input);
}

TEST(Checkpoint, expert_grids_become_per_expert_views) {
  TempDir dir;
  const int64_t E = 3, rows = 4, cols = 64;
  std::vector<uint32_t> packed(static_cast<size_t>(E * rows * cols * 4 / 32));
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = static_cast<uint32_t>(i);
  std::vector<uint16_t> scales(static_cast<size_t>(E * rows), f32_to_bf16(1.0f));
  std::vector<float> dense(static_cast<size_t>(E * rows * cols));
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = static_cast<float>(i);
  write_bytes(dir.path / "model.safetensors",
              make_safetensors({{"mlp.switch_mlp.up_proj.weight", "U32", {E, rows, cols / 8}, bytes_of(packed)},
                                {"mlp.switch_mlp.up_proj.scales", "BF16", {E, rows, 1}, bytes_of(scales)},
                                {"mlp.switch_mlp.up_proj.biases", "BF16", {E, rows, 1}, bytes_of(scales)},
                                {"mlp.experts.down_proj", "F32", {E, rows, cols}, bytes_of(dense)}}));
  Checkpoint ckpt(dir.str());
  QuantConfig q = QuantConfig::from_json(nlohmann::json::parse(R"({"quantization": {"group_size": 64, "bits": 4}})"));
  auto up = ckpt.experts("mlp.switch_mlp.up_proj", E, rows, cols, q);
  ASSERT_EQ(up.size(), 3u);
  EXPECT_EQ(up[2].quant.bits, 4);
  EXPECT_EQ(up[2].data.dim(0), rows);
  EXPECT_EQ(up[2].data.dim(1), 8);
  EXPECT_EQ(up[2].data.data<uint32_t>()[0], static_cast<uint32_t>(2 * rows * 8));
  EXPECT_EQ(up[1].scales.dim(1), 1);
  // HF fused grid under the bare name, dense.
  auto down = ckpt.experts("mlp.experts.down_proj", E, rows, cols, QuantConfig{});
  EXPECT_FALSE(down[1].quantized());
  EXPECT_EQ(down[1].data.data<float>()[0], static_cast<float>(rows * cols));
  ckpt.check_all_used();
  expect_error([&] { ckpt.experts("mlp.experts.down_proj", 4, rows, cols, QuantConfig{}); },
               {"tensor 'mlp.experts.down_proj': expected (4, 4, 64) float, got (3, 4, 64) f32"}, ErrorKind::invalid_input);
  QuantConfig q8 = QuantConfig::from_json(nlohmann::json::parse(R"({"quantization": {"group_size": 64, "bits": 8}})"));
  expect_error([&] { ckpt.experts("mlp.switch_mlp.up_proj", E, rows, cols, q8); }, {"expected (3, 4, 16) u32 (8-bit packed)"},
               ErrorKind::invalid_input);
}

TEST(Checkpoint, extra_unused_tensors_are_listed) {
  TempDir dir;
  std::vector<StTensor> ts;
  for (int i = 0; i < 8; ++i) ts.push_back(f32_tensor("extra." + std::to_string(i), {1}));
  ts.push_back(f32_tensor("used", {1}));
  ts.push_back(f32_tensor("model.visual.blocks.0.attn.qkv.weight", {1}));
  write_bytes(dir.path / "model.safetensors", make_safetensors(ts));
  Checkpoint ckpt(dir.str());
  ckpt.tensor("used");
  ckpt.ignore_prefix("model.visual.");
  EXPECT_EQ(ckpt.unused().size(), 8u);
  expect_error([&] { ckpt.check_all_used(); }, {"8 unexpected tensors", "'extra.0'", "'extra.4'", "3 more"}, ErrorKind::invalid_input);
  for (int i = 0; i < 8; ++i) ckpt.tensor("extra." + std::to_string(i));
  ckpt.check_all_used();
}

TEST(Checkpoint, corrupt_shard_error_names_the_file) {
  TempDir dir;
  std::string bytes = make_safetensors({f32_tensor("w", {64})});
  write_bytes(dir.path / "model.safetensors", bytes.substr(0, bytes.size() - 1));
  expect_error([&] { Checkpoint c(dir.str()); }, {"model.safetensors: tensor 'w' data_offsets", "truncated"}, ErrorKind::invalid_input);
}

}  // namespace
}  // namespace sanctum
