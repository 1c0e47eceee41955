#include "base/tuning.h"

#include <cstdlib>
#include <string>

#include "base/error.h"

namespace sanctum {

namespace {

// Every off path runs in tests/gpu/tuning_off_paths_check.py (each knob off alone, against the
// defaults, on a dense hybrid and a MoE model); a knob whose off path also has a dedicated check names
// it first. The figures in a status are the ones measured when the optimization was added
// (bench/RESULTS.md).
constexpr const char* kOffPaths = "tests/gpu/tuning_off_paths_check.py";
constexpr const char* kPending = "pending a device sweep at the current code: measured faster when added";

constexpr KnobInfo kTable[] = {
    {Knob::cuda_graphs, "cuda_graphs", "cuda",
     "each decode step is recorded once as a CUDA graph and replayed (off: kernels launched one by one)", "tests/gpu/cuda_graph_check.py",
     "kept: with it off a faulting kernel fails at its own launch"},
    {Knob::gpu_sampling, "gpu_sampling", "cuda",
     "tokens are picked on the GPU and only ids cross to the host (off: logits come to the host)", kOffPaths,
     "kept: compares the GPU picks with the host sampler's"},
    {Knob::chained_decode, "chained_decode", "cuda",
     "each decode step is queued before the host has read the token of the one before (off: the host waits for each token)",
     "tests/gpu/cuda_graph_check.py", "kept: with it off each step's token is checked before the next one runs"},
    {Knob::host_copy_kernel, "host_copy_kernel", "cuda",
     "a chained step's token reaches the host through a kernel's write into pinned memory (off: a copy-engine transfer)", kOffPaths,
     "pending a device sweep at the current code: MoE decode 560.0 -> 562.0 tok/s when added"},
    {Knob::early_launch, "early_launch", "cuda",
     "decode kernels start while the one before them ends (programmatic dependent launch, sm_90; off: one after the other)", kOffPaths,
     "pending a device sweep at the current code: 24B decode 141.7 -> 147.4 tok/s when added"},
    {Knob::stack_weights, "stack_weights", "cuda",
     "projections that read the same input are stacked into one weight at load (off: kept apart)", kOffPaths,
     "pending a device sweep at the current code: 27B decode 81.5 -> 93.1 tok/s when added"},
    {Knob::tile_weights, "tile_weights", "cuda",
     "in the bf16 mode 4-bit weights are reordered in place at load for the decode mat-vec (off: checkpoint layout)",
     "tests/gpu/large_shape_parity.py", "pending a device sweep at the current code: the tiled mat-vec needs it"},
    {Knob::matvec_parts, "matvec_parts", "cuda",
     "long rows of few-row weights are split across blocks, their sums added in a fixed order (off: never)", kOffPaths,
     "pending a device sweep at the current code: 24B decode 180.5 -> 188.4 tok/s when added"},
    {Knob::matvec_split_waves, "matvec_split_waves", "cuda",
     "large weights take fewer, longer mat-vec blocks where those still fill whole waves (off: split by warp count alone)", kOffPaths,
     "pending a device sweep at the current code: 24B decode 195.6 -> 207.7 tok/s when added"},
    {Knob::matvec_joint_split, "matvec_joint_split", "cuda",
     "the warps per row tile and the column parts of a mat-vec are chosen together (off: the parts after the warps)", kOffPaths,
     "pending a device sweep at the current code: 24B decode 205.3 -> 207.4 tok/s when added"},
    {Knob::weight_evict_first, "weight_evict_first", "cuda",
     "the mat-vecs' weight loads ask L2 to evict them first, as each is read once a step (off: normal priority)", kOffPaths,
     "pending a device sweep at the current code: 27B decode 142.2 -> 144.0 tok/s when added"},
    {Knob::fuse_norm, "fuse_norm", "cuda",
     "in decode the RMSNorm between sub-blocks is split across the mat-vecs around it (off: an add + RMSNorm launch between them)",
     "tests/gpu/split_norm_check.py", "pending a device sweep at the current code: 24B decode 210.6 -> 218.2 tok/s when added"},
    {Knob::fuse_swiglu, "fuse_swiglu", "cuda",
     "in decode an MLP's gate/up mat-vec (dense or the chosen experts) writes silu(gate) * up (off: a SwiGLU launch of its own)", kOffPaths,
     kPending},
    {Knob::route_in_experts, "route_in_experts", "cuda",
     "a MoE layer's expert gate/up launch picks each token's experts and weights itself (off: a routing launch ahead of it)", kOffPaths,
     "pending a device sweep at the current code: MoE decode 506.0 -> 525.6 tok/s when added"},
    {Knob::fuse_moe_combine, "fuse_moe_combine", "cuda",
     "a MoE layer's expert down launch ends in the combine into the residual stream (off: a combine launch after it)", kOffPaths,
     "pending a device sweep at the current code: MoE decode 545.1 -> 551.2 tok/s when added"},
    {Knob::stage_expert_tables, "stage_expert_tables", "cuda",
     "the expert launches read the experts' addresses from shared memory (off: from global memory)", kOffPaths,
     "pending a device sweep at the current code: MoE decode 560.3 -> 567.8 tok/s when added"},
    {Knob::fuse_head_norm_rope, "fuse_head_norm_rope", "cuda",
     "a gated attention layer's q and k head norms run in its RoPE + cache-store launch (off: two norm launches ahead of it)", kOffPaths,
     "pending a device sweep at the current code: MoE decode 561.4 -> 570.9 tok/s when added"},
    {Knob::fuse_attention_gate, "fuse_attention_gate", "cuda",
     "a gated attention layer's output gate is applied where the decode attention writes (off: a gate launch after it)", kOffPaths,
     "pending a device sweep at the current code: MoE decode 573.1 -> 576.8 tok/s when added"},
    {Knob::tiles_gemm, "tiles_gemm", "cuda",
     "on Hopper, prompt forwards multiply 4-bit tiled weights in a GEMM that dequantizes in registers (off: a bf16 copy for cuBLAS)",
     kOffPaths, "pending a device sweep at the current code: 27B pp512 6,305 -> 6,749 tok/s when added"},
    {Knob::flash_wgmma, "flash_wgmma", "cuda",
     "on Hopper, prompt attention of head dim 128 runs on the warpgroup MMA (off: the mma.sync flash kernel)", kOffPaths,
     "pending a device sweep at the current code: 24B pp4096 11,592 -> 12,029 tok/s when added"},
    {Knob::gemm_bf16_out, "gemm_bf16_out", "cuda", "a prompt's MLP gate/up GEMM writes bf16 for the SwiGLU (off: f32)", kOffPaths,
     "pending a device sweep at the current code: 24B pp4096 11,741 -> 12,109 tok/s when added"},
    {Knob::delta_bf16, "delta_bf16", "cuda", "a prompt's output projections write bf16 for the residual add (off: f32)", kOffPaths,
     "pending a device sweep at the current code: 24B pp4096 12,345 -> 12,408 tok/s when added"},
    {Knob::norm_bf16_out, "norm_bf16_out", "cuda",
     "a prompt's norms write bf16 for the projections that round their input to bf16 anyway (off: f32)", kOffPaths,
     "pending a device sweep at the current code: 24B pp4096 +3.1% when added"},
    {Knob::attention_bf16_out, "attention_bf16_out", "cuda",
     "prompt attention of head dim 128 writes bf16 for the output projection (off: f32)", kOffPaths,
     "pending a device sweep at the current code: 24B pp4096 12,562 -> 12,644 tok/s when added"},
    {Knob::norm_chunks, "norm_chunks", "cuda", "RMSNorm rows of up to a few thousand columns are held in registers in chunks (off: never)",
     kOffPaths, "pending a device sweep at the current code: 24B pp512 10,877 -> 11,180 tok/s when added"},
};
static_assert(std::size(kTable) == kKnobCount, "one table row per Knob");

constexpr bool table_in_knob_order() {
  for (size_t i = 0; i < kKnobCount; ++i)
    if (static_cast<size_t>(kTable[i].knob) != i) return false;
  return true;
}
static_assert(table_in_knob_order(), "kTable rows follow the Knob enum");

std::string known_keys() {
  std::string s;
  for (const KnobInfo& k : kTable) {
    if (!s.empty()) s += ", ";
    s += k.name;
  }
  return s;
}

bool parse_value(std::string_view v, bool& out) {
  if (v == "1" || v == "on" || v == "true") return out = true, true;
  if (v == "0" || v == "off" || v == "false") return out = false, true;
  return false;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

thread_local const Tuning* t_current = nullptr;

}  // namespace

std::span<const KnobInfo> knob_table() { return kTable; }

const KnobInfo& knob_info(Knob knob) { return kTable[static_cast<size_t>(knob)]; }

void Tuning::apply(std::string_view spec, std::string_view source) {
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    check(eq != std::string_view::npos, ErrorKind::invalid_argument,
          std::string(source) + ": '" + std::string(item) + "' is not KEY=VALUE (e.g. cuda_graphs=0); see sanctum --help-tuning");
    const std::string_view key = trim(item.substr(0, eq));
    const std::string_view value = trim(item.substr(eq + 1));
    const KnobInfo* found = nullptr;
    for (const KnobInfo& k : kTable)
      if (key == k.name) found = &k;
    check(found != nullptr, ErrorKind::invalid_argument,
          std::string(source) + ": unknown tuning knob '" + std::string(key) + "'; the knobs are " + known_keys());
    bool on = true;
    check(parse_value(value, on), ErrorKind::invalid_argument,
          std::string(source) + ": " + std::string(key) + "=" + std::string(value) + ": the value must be 1, 0, on, off, true or false");
    set(found->knob, on);
  }
}

Tuning Tuning::from_environment() {
  Tuning t;
  if (const char* env = std::getenv("SANCTUM_TUNE")) t.apply(env, "SANCTUM_TUNE");
  return t;
}

std::string Tuning::differences() const {
  std::string s;
  for (const KnobInfo& k : kTable)
    if (!on(k.knob)) {
      if (!s.empty()) s += ",";
      s += k.name;
      s += "=0";
    }
  return s;
}

const Tuning& current_tuning() {
  static const Tuning defaults;
  return t_current != nullptr ? *t_current : defaults;
}

ScopedTuning::ScopedTuning(const Tuning& tuning) : previous_(t_current) { t_current = &tuning; }
ScopedTuning::~ScopedTuning() { t_current = previous_; }

std::string tuning_help_text() {
  std::string s =
      "Tuning knobs: sanctum <command> --tune KEY=VALUE,... (or SANCTUM_TUNE=KEY=VALUE,...; --tune wins).\n"
      "Every knob is on by default; 0/off turns the optimization off, for comparisons and debugging.\n\n";
  for (const KnobInfo& k : kTable) {
    s += "  " + std::string(k.name) + " (" + k.device + ")\n";
    s += "      " + std::string(k.meaning) + "\n";
    s += "      off path tested by: " + std::string(k.off_test) + "\n";
    s += "      status: " + std::string(k.status) + "\n";
  }
  return s;
}

std::string tuning_markdown() {
  std::string s =
      "# Tuning knobs\n\n"
      "<!-- Generated by `sanctum --help-tuning --markdown` from src/base/tuning.cc; edit the table there. -->\n\n"
      "Optimizations that can be turned off, to compare them with the path they replaced or to debug one.\n"
      "Set them with `--tune KEY=VALUE,...` on `serve`, `generate`, `bench` and `logits`, or with the\n"
      "`SANCTUM_TUNE` environment variable (the flag wins). Every knob is on by default; `0` or `off`\n"
      "turns it off. A knob belongs to the model it was loaded with, so two models of one process can\n"
      "differ. `scripts/gpu_check.sh run --sweep=KNOB=0,1` times a knob both ways on a GPU machine.\n\n"
      "Two other environment variables are settings, not knobs: `SANCTUM_MATMUL_PRECISION` (what\n"
      "`--matmul-precision` sets) and `SANCTUM_DEFAULT_MODEL` (the model used without `--model`).\n\n"
      "| knob | device | on (the default) | off path tested by | status |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const KnobInfo& k : kTable)
    s += "| `" + std::string(k.name) + "` | " + k.device + " | " + k.meaning + " | `" + k.off_test + "` | " + k.status + " |\n";
  return s;
}

}  // namespace sanctum
