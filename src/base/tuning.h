#pragma once
// The one table of tuning knobs: optimizations that can be turned off to compare them with the path
// they replaced or to debug one, each with its default, a one-line meaning, the test that runs its
// other path and why it is still a knob.
//
// A Tuning is parsed once, from SANCTUM_TUNE and then --tune (both "KEY=VALUE,..." with VALUE one of
// 1/0, on/off, true/false), and travels with the model it was loaded with (load_model's argument,
// ModelConfig::tuning). Model code reads it there; the kernels read the Tuning that the model running
// on this thread installed (ScopedTuning, at load and around each forward), so two models of one
// process, or two parts of one test, can run with different settings. `sanctum --help-tuning` prints
// the table; docs/tuning.md is generated from it.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace sanctum {

enum class Knob : uint8_t {
  // The decode step as a whole.
  cuda_graphs,
  gpu_sampling,
  batch_graphs,
  chained_decode,
  host_copy_kernel,
  early_launch,
  // Weights at load.
  stack_weights,
  tile_weights,
  // The decode mat-vec.
  matvec_parts,
  matvec_split_waves,
  matvec_joint_split,
  weight_evict_first,
  group_decode_experts,
  // Launches fused in decode.
  fuse_norm,
  fuse_swiglu,
  route_in_experts,
  fuse_moe_combine,
  stage_expert_tables,
  fuse_head_norm_rope,
  fuse_attention_gate,
  // Prompt (prefill) forwards.
  tiles_gemm,
  flash_wgmma,
  gemm_bf16_out,
  delta_bf16,
  norm_bf16_out,
  attention_bf16_out,
  norm_chunks,
  // Memory.
  kv_shared_pages,
  count_,
};

inline constexpr size_t kKnobCount = static_cast<size_t>(Knob::count_);

struct KnobInfo {
  Knob knob;
  const char* name;      // the KEY of --tune KEY=VALUE
  const char* device;    // "cuda", "cpu" or both: where the knob changes anything
  const char* meaning;   // what "on" does; off is the path it replaced
  const char* off_test;  // the test that runs the off path
  const char* status;    // why it is still a knob, or the decision it waits for
};

// Every knob, in Knob order. All default to on.
std::span<const KnobInfo> knob_table();
const KnobInfo& knob_info(Knob knob);

class Tuning {
 public:
  Tuning() { on_.fill(true); }

  bool on(Knob knob) const { return on_[static_cast<size_t>(knob)]; }
  void set(Knob knob, bool value) { on_[static_cast<size_t>(knob)] = value; }

  // Applies "KEY=VALUE,..." on top of this; throws Error(invalid_argument) naming an unknown key or a
  // bad value and listing what is accepted. `source` names where the text came from, for the error.
  void apply(std::string_view spec, std::string_view source = "--tune");
  // The defaults, then SANCTUM_TUNE from the environment.
  static Tuning from_environment();
  // "KEY=0,KEY=0" of the knobs that differ from the defaults ("" when none), as serve logs them.
  std::string differences() const;

  bool operator==(const Tuning&) const = default;

 private:
  std::array<bool, kKnobCount> on_{};
};

// The Tuning the kernels see on this thread: the one a ScopedTuning installed, else the defaults.
const Tuning& current_tuning();

// Installs a Tuning for this thread until destroyed (nests; the previous one comes back).
class ScopedTuning {
 public:
  explicit ScopedTuning(const Tuning& tuning);
  ~ScopedTuning();
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;

 private:
  const Tuning* previous_;
};

// The table as text for --help-tuning, and as the Markdown page docs/tuning.md.
std::string tuning_help_text();
std::string tuning_markdown();

}  // namespace sanctum
