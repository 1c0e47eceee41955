// The tuning registry: parsing (flag and environment), errors that name the problem, the table's
// completeness, and the per-thread Tuning the kernels read.
#include "base/tuning.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "base/error.h"
#include "model/model.h"

namespace sanctum {
namespace {

const std::string kRepo = std::string(SANCTUM_TEST_DATA_DIR) + "/../..";

std::string error_of(const std::string& spec) {
  try {
    Tuning t;
    t.apply(spec);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(Tuning, every_knob_defaults_to_on) {
  const Tuning t;
  for (const KnobInfo& k : knob_table()) EXPECT_TRUE(t.on(k.knob)) << k.name;
  EXPECT_EQ(t.differences(), "");
}

TEST(Tuning, apply_sets_the_named_knobs_and_accepts_every_spelling) {
  Tuning t;
  t.apply("cuda_graphs=0, fuse_norm=off,tiles_gemm=false");
  EXPECT_FALSE(t.on(Knob::cuda_graphs));
  EXPECT_FALSE(t.on(Knob::fuse_norm));
  EXPECT_FALSE(t.on(Knob::tiles_gemm));
  EXPECT_TRUE(t.on(Knob::fuse_swiglu));
  EXPECT_EQ(t.differences(), "cuda_graphs=0,fuse_norm=0,tiles_gemm=0");
  t.apply("cuda_graphs=1,fuse_norm=on,tiles_gemm=true,,");
  EXPECT_EQ(t, Tuning{});
}

TEST(Tuning, a_later_setting_of_one_knob_wins) {
  Tuning t;
  t.apply("early_launch=0,early_launch=1");
  EXPECT_TRUE(t.on(Knob::early_launch));
}

TEST(Tuning, an_unknown_knob_is_named_with_the_ones_that_exist) {
  const std::string e = error_of("fuse_everything=0");
  EXPECT_NE(e.find("unknown tuning knob 'fuse_everything'"), std::string::npos) << e;
  EXPECT_NE(e.find("cuda_graphs"), std::string::npos) << e;
  EXPECT_NE(e.find("--tune"), std::string::npos) << e;
}

TEST(Tuning, a_bad_value_or_a_missing_equals_sign_is_refused) {
  EXPECT_NE(error_of("fuse_norm=2").find("fuse_norm=2: the value must be 1, 0, on, off, true or false"), std::string::npos);
  EXPECT_NE(error_of("fuse_norm").find("'fuse_norm' is not KEY=VALUE"), std::string::npos);
  EXPECT_NE(error_of("fuse_norm=").find("the value must be"), std::string::npos);
}

TEST(Tuning, the_environment_is_read_by_from_environment_and_named_in_its_errors) {
  ::setenv("SANCTUM_TUNE", "gpu_sampling=0", 1);
  EXPECT_FALSE(Tuning::from_environment().on(Knob::gpu_sampling));
  ::setenv("SANCTUM_TUNE", "gpu_sampling=maybe", 1);
  try {
    (void)Tuning::from_environment();
    ADD_FAILURE() << "a bad SANCTUM_TUNE was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SANCTUM_TUNE: gpu_sampling=maybe"), std::string::npos) << e.what();
  }
  ::unsetenv("SANCTUM_TUNE");
  EXPECT_EQ(Tuning::from_environment(), Tuning{});
}

TEST(Tuning, the_table_has_one_complete_row_per_knob_whose_test_exists) {
  ASSERT_EQ(knob_table().size(), kKnobCount);
  std::set<std::string> names;
  for (size_t i = 0; i < kKnobCount; ++i) {
    const KnobInfo& k = knob_table()[i];
    EXPECT_EQ(static_cast<size_t>(k.knob), i);
    EXPECT_TRUE(names.insert(k.name).second) << "duplicate " << k.name;
    const std::string device = k.device;
    EXPECT_TRUE(device == "cuda" || device == "cpu" || device == "cpu, cuda") << k.name;
    EXPECT_GT(std::string(k.meaning).size(), 20u) << k.name;
    EXPECT_GT(std::string(k.status).size(), 10u) << k.name;
    EXPECT_TRUE(std::filesystem::exists(kRepo + "/" + k.off_test)) << k.name << ": " << k.off_test << " does not exist";
    EXPECT_EQ(&knob_info(k.knob), &k);
  }
}

TEST(Tuning, help_and_markdown_list_every_knob) {
  const std::string help = tuning_help_text(), md = tuning_markdown();
  for (const KnobInfo& k : knob_table()) {
    EXPECT_NE(help.find(std::string("  ") + k.name + " ("), std::string::npos) << k.name;
    EXPECT_NE(md.find(std::string("| `") + k.name + "` |"), std::string::npos) << k.name;
  }
}

TEST(ScopedTuning, installs_a_tuning_for_its_thread_only_and_restores_the_previous_one) {
  Tuning a, b;
  a.set(Knob::matvec_parts, false);
  b.set(Knob::norm_chunks, false);
  EXPECT_EQ(current_tuning(), Tuning{});
  {
    const ScopedTuning outer(a);
    EXPECT_FALSE(current_tuning().on(Knob::matvec_parts));
    {
      const ScopedTuning inner(b);
      EXPECT_TRUE(current_tuning().on(Knob::matvec_parts));
      EXPECT_FALSE(current_tuning().on(Knob::norm_chunks));
    }
    EXPECT_EQ(current_tuning(), a);
    bool other_thread_sees_defaults = false;
    std::thread([&] { other_thread_sees_defaults = current_tuning() == Tuning{}; }).join();
    EXPECT_TRUE(other_thread_sees_defaults);
  }
  EXPECT_EQ(current_tuning(), Tuning{});
}

TEST(Tuning, each_loaded_model_keeps_its_own_tuning) {
  const std::string dir = std::string(SANCTUM_TEST_DATA_DIR) + "/hf_fixtures/qwen3_5_text";
  Tuning off;
  off.apply("cuda_graphs=0,stack_weights=0");
  const auto plain = load_model(dir);
  const auto tuned = load_model(dir, Device::cpu, off);
  EXPECT_EQ(plain->config().tuning, Tuning{});
  EXPECT_EQ(tuned->config().tuning, off);
}

}  // namespace
}  // namespace sanctum
