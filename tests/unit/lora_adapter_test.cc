// Reading adapters (lora_adapter.h) in both formats into one layout, placing them on a checkpoint's
// modules, the checkpoint handing out merged weights, and an adapter behind the manifest gate: the
// load reads the files the check hashed and refuses one swapped since.
#include "weights/adapters/lora_adapter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include "../weights/safetensors_writer.h"
#include "base/error.h"
#include "security/gate.h"
#include "security/secure_io.h"
#include "weights/adapters/adapter_config.h"
#include "weights/checkpoint.h"

namespace sanctum {
namespace {

namespace fs = std::filesystem;
using testing::bytes_of;
using testing::make_safetensors;
using testing::StTensor;
using testing::TempDir;
using testing::write_bytes;

StTensor f32(const std::string& name, std::vector<int64_t> shape, float base) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + 0.01f * static_cast<float>(i);
  return {name, "F32", std::move(shape), bytes_of(v)};
}

void write_text(const fs::path& p, const std::string& text) { write_bytes(p, text); }

// A checkpoint with one (out 3, in 4) f32 linear and one it never adapts.
void write_checkpoint(const fs::path& dir) {
  fs::create_directories(dir);
  write_bytes(dir / "model.safetensors", make_safetensors({f32("model.layers.0.self_attn.q_proj.weight", {3, 4}, 1.0f),
                                                           f32("model.layers.0.self_attn.k_proj.weight", {3, 4}, 2.0f)}));
}

// mlx-lm stores A as (in 4, r 2) and B as (r 2, out 3).
void write_mlx_adapter(const fs::path& dir, const std::string& module = "model.layers.0.self_attn.q_proj") {
  fs::create_directories(dir);
  write_bytes(dir / "adapters.safetensors",
              make_safetensors({f32(module + ".lora_a", {4, 2}, 0.5f), f32(module + ".lora_b", {2, 3}, -0.25f)}));
  write_text(dir / "adapter_config.json",
             R"({"fine_tune_type": "lora", "num_layers": 1, "lora_parameters": {"rank": 2, "scale": 3.0, "dropout": 0.1}})");
}

TEST(LoraAdapter, mlx_lm_tensors_are_transposed_to_rank_by_in_and_out_by_rank) {
  TempDir d;
  write_mlx_adapter(d.path);
  auto a = LoraAdapter::load(d.str());
  ASSERT_EQ(a->targets().size(), 1u);
  const LoraTarget& t = a->targets().begin()->second;
  EXPECT_EQ(t.module, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(t.a.shape_string(), "(2, 4) f32");
  EXPECT_EQ(t.b.shape_string(), "(3, 2) f32");
  EXPECT_FLOAT_EQ(t.scale, 3.0f);
  // A[k][i] = lora_a[i][k] = 0.5 + 0.01 (2 i + k)
  EXPECT_FLOAT_EQ(t.a.data<float>()[1 * 4 + 3], 0.5f + 0.01f * 7);
  // B[o][k] = lora_b[k][o] = -0.25 + 0.01 (3 k + o)
  EXPECT_FLOAT_EQ(t.b.data<float>()[2 * 2 + 1], -0.25f + 0.01f * 5);
}

TEST(LoraAdapter, peft_scale_follows_rslora_and_the_patterns) {
  TempDir d;
  const std::string p = "base_model.model.model.layers.0.";
  write_bytes(d.path / "adapter_model.safetensors",
              make_safetensors({f32(p + "self_attn.q_proj.lora_A.weight", {4, 4}, 0), f32(p + "self_attn.q_proj.lora_B.weight", {3, 4}, 0),
                                f32(p + "mlp.down_proj.lora_A.weight", {2, 4}, 0), f32(p + "mlp.down_proj.lora_B.weight", {3, 2}, 0)}));
  write_text(d.path / "adapter_config.json", R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_rslora": true,
      "target_modules": ["q_proj", "down_proj"], "rank_pattern": {"down_proj": 2}, "alpha_pattern": {"down_proj": 6}})");
  auto a = LoraAdapter::load(d.str());
  EXPECT_FLOAT_EQ(a->targets().at("model.layers.0.self_attn.q_proj").scale, 8.0f / 2.0f);
  EXPECT_FLOAT_EQ(a->targets().at("model.layers.0.mlp.down_proj").scale, 6.0f / std::sqrt(2.0f));
}

// Patterns a backtracking matcher could take exponential time over (found by adapter_config_fuzz)
// are refused by name, at once; PEFT's own optional wrapper and plain alternations still match.
TEST(LoraAdapter, target_patterns_that_could_backtrack_for_ever_are_refused) {
  const std::string module = "model.layers.3.self_attn.q_proj";
  for (const char* pattern :
       {".+++++++++++++++++++++++++++++*\\\\.QQQQ(q_proj|v_proj)", "(a+)+b", "(q_proj|v_proj)*", "(.*)*q_proj", "(a{1,3})+"}) {
    const std::string text = std::string(R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ")") + pattern + "\"}";
    std::string why;
    try {  // refused when the config is read, or at the latest when it is asked about a module
      (void)parse_adapter_config(text, "adapter_config.json", AdapterFormat::peft).targets(module, 4, &why);
      ADD_FAILURE() << "no error for " << pattern;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("exponential"), std::string::npos) << pattern << ": " << e.what();
    }
  }
  for (const char* pattern :
       {".*\\\\.(q_proj|v_proj)", "(.*\\\\.)?(q_proj)", ".*?q_proj", "model\\\\.layers\\\\.[0-9]+\\\\.self_attn\\\\.q_proj"}) {
    const std::string text = std::string(R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ")") + pattern + "\"}";
    const AdapterConfig config = parse_adapter_config(text, "adapter_config.json", AdapterFormat::peft);
    std::string why;
    EXPECT_TRUE(config.targets(module, 4, &why)) << pattern << ": " << why;
  }
}

TEST(LoraAdapter, checkpoint_hands_out_merged_weights_and_leaves_the_rest) {
  TempDir d;
  write_checkpoint(d.path / "model");
  write_mlx_adapter(d.path / "adapter");
  auto adapter = LoraAdapter::load((d.path / "adapter").string());
  Checkpoint ckpt((d.path / "model").string());
  ckpt.attach_adapter(adapter);
  const Weight q = ckpt.linear("model.layers.0.self_attn.q_proj", 3, 4, QuantConfig{});
  const Weight k = ckpt.linear("model.layers.0.self_attn.k_proj", 3, 4, QuantConfig{});
  const LoraTarget& t = adapter->targets().begin()->second;
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < 4; ++i) {
      double delta = 0;
      for (int64_t r = 0; r < 2; ++r) delta += t.b.data<float>()[o * 2 + r] * t.a.data<float>()[r * 4 + i];
      EXPECT_NEAR(q.data.data<float>()[o * 4 + i], 1.0 + 0.01 * (o * 4 + i) + 3.0 * delta, 1e-5);
      EXPECT_FLOAT_EQ(k.data.data<float>()[o * 4 + i], 2.0f + 0.01f * static_cast<float>(o * 4 + i));
    }
  EXPECT_NO_THROW(ckpt.check_all_used());
}

TEST(LoraAdapter, a_target_the_model_never_reads_is_refused_at_the_end_of_the_load) {
  TempDir d;
  write_checkpoint(d.path / "model");
  write_mlx_adapter(d.path / "adapter", "model.layers.0.self_attn.k_proj");
  Checkpoint ckpt((d.path / "model").string());
  ckpt.attach_adapter(LoraAdapter::load((d.path / "adapter").string()));
  ckpt.linear("model.layers.0.self_attn.q_proj", 3, 4, QuantConfig{});
  ckpt.ignore_prefix("model.layers.0.self_attn.k_proj");
  try {
    ckpt.check_all_used();
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adapts 'model.layers.0.self_attn.k_proj'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("which this model does not use"), std::string::npos) << e.what();
  }
}

TEST(LoraAdapter, a_second_adapter_on_one_checkpoint_is_refused) {
  TempDir d;
  write_checkpoint(d.path / "model");
  write_mlx_adapter(d.path / "adapter");
  Checkpoint ckpt((d.path / "model").string());
  ckpt.attach_adapter(LoraAdapter::load((d.path / "adapter").string()));
  EXPECT_THROW(ckpt.attach_adapter(LoraAdapter::load((d.path / "adapter").string())), Error);
}

TEST(LoraAdapter, targets_land_on_the_other_checkpoint_flavour_of_the_same_module) {
  TempDir d;
  // Trained on mlx-community names, applied to a Hugging Face-named VL checkpoint (and its vision tower
  // and MTP layers, which share the suffixes, are not candidates).
  write_mlx_adapter(d.path / "adapter", "language_model.model.layers.0.self_attn.q_proj");
  auto adapter = LoraAdapter::load((d.path / "adapter").string());
  const std::vector<std::string> names = {"model.language_model.layers.0.self_attn.q_proj.weight", "mtp.layers.0.self_attn.q_proj.weight",
                                          "model.visual.layers.0.self_attn.q_proj.weight", "lm_head.weight"};
  const AdapterPlacement placed = place_adapter(*adapter, names, "ckpt");
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed.begin()->first, "model.language_model.layers.0.self_attn.q_proj");
}

struct VerifiedAdapter : ::testing::Test {
  TempDir d;
  fs::path adapter;
  std::string manifest;
  void SetUp() override {
    adapter = d.path / "adapter";
    write_mlx_adapter(adapter);
    manifest = d.file("adapter.sha256");
    security::write_file(manifest, security::generate_manifest(adapter.string()).text, 0644, security::WriteMode::replace);
  }
  security::VerifyReport verify() {
    return security::verify_model_against_manifest(adapter.string(), manifest, std::nullopt, std::nullopt);
  }
};

TEST_F(VerifiedAdapter, manifest_lists_the_config_and_weights_and_the_verified_load_reads_them) {
  const security::VerifyReport r = verify();
  EXPECT_EQ(r.pinned.size(), 2u);
  auto a = LoraAdapter::load(adapter.string(), &r.pinned);
  EXPECT_EQ(a->targets().size(), 1u);
}

TEST_F(VerifiedAdapter, a_weights_file_swapped_after_the_check_is_refused_by_name) {
  const security::VerifyReport r = verify();
  const fs::path other = d.path / "other";
  write_mlx_adapter(other);
  write_bytes(other / "adapters.safetensors", make_safetensors({f32("model.layers.0.self_attn.q_proj.lora_a", {4, 2}, 9.0f),
                                                                f32("model.layers.0.self_attn.q_proj.lora_b", {2, 3}, 9.0f)}));
  fs::rename(other / "adapters.safetensors", adapter / "adapters.safetensors");
  try {
    LoraAdapter::load(adapter.string(), &r.pinned);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adapters.safetensors"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sanctum
