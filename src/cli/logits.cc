// sanctum logits: writes the logits of every prompt position to a .npy file (f32, (n, vocab)).
// For parity tests against reference implementations. --split K feeds the first K tokens as one
// prefill and the rest --step tokens at a time (default 1: decode steps), so tests can check that
// prefill + decode and prefill + chunked prefill equal one full prefill.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cli/adapter_flags.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "cli/ids.h"
#include "cli/npy.h"
#include "model/model.h"
#include "ops/precision.h"

namespace sanctum::cli {
namespace {

int run_logits(int argc, char** argv) {
  Args args(argc, argv,
            {"model", "prompt-ids", "out", "split", "step", "threads", "matmul-precision", kKvCacheDtypeFlag, kDeviceFlag,
             kGpuMemoryLimitFlag, kTuneFlag, kAdapterFlag, kLoraFlag},
            {"help"});
  if (args.has("help") || !args.has("model") || !args.has("prompt-ids") || !args.has("out")) {
    std::fputs(
        "usage: sanctum logits --model DIR --prompt-ids 1,2,3 --out FILE.npy [--split K [--step S]] [--threads N]\n"
        "                      [--matmul-precision f32|int8|bf16] [--device cpu|cuda] [--gpu-memory-limit-mb N]\n"
        "                      [--kv-cache-dtype f32|bf16|q8|q4v]\n"
        "                      [--adapter DIR | --lora DIR]\n",
        args.has("help") ? stdout : stderr);
    return args.has("help") ? 0 : 2;
  }
  if (args.has("threads")) set_compute_threads(static_cast<int>(args.get_int("threads", 0)));
  if (args.has("matmul-precision")) ops::set_matmul_precision(ops::parse_matmul_precision(*args.get("matmul-precision")));
  const Device device = apply_device_flags(args);
  std::vector<int32_t> prompt = parse_ids(*args.get("prompt-ids"));
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int64_t split = args.get_int("split", n);
  const int64_t step = args.get_int("step", 1);
  check(split >= 1 && split <= n, ErrorKind::invalid_argument, "--split must be in [1, number of prompt ids]");
  check(step >= 1, ErrorKind::invalid_argument, "--step must be >= 1");

  auto model = load_model(*args.get("model"), device, tuning_from_flags(args), nullptr, adapter_from_flags(args));
  const int64_t vocab = model->vocab_size();
  for (int32_t id : prompt) check(id < vocab, ErrorKind::invalid_argument, "token id " + std::to_string(id) + " is outside the vocabulary");
  SequenceState state = model->new_state();
  state.set_lora(lora_from_flags(args, *model));
  std::vector<float> out(static_cast<size_t>(n * vocab));
  auto keep = [&](const Tensor& logits, int64_t first_row) {
    for (int64_t r = 0; r < logits.dim(0); ++r)
      std::memcpy(&out[static_cast<size_t>((first_row + r) * vocab)], logits.data<float>() + r * logits.stride(0),
                  static_cast<size_t>(vocab) * sizeof(float));
  };
  keep(model->forward(std::span<const int32_t>(prompt).first(static_cast<size_t>(split)), state, LogitsFor::all), 0);
  for (int64_t i = split; i < n; i += step) {
    const auto count = static_cast<size_t>(std::min(step, n - i));
    keep(model->forward(std::span<const int32_t>(prompt).subspan(static_cast<size_t>(i), count), state, LogitsFor::all), i);
  }
  write_npy(*args.get("out"), out, n, vocab);
  return 0;
}

SubcommandRegistration reg("logits", "dump per-position logits to .npy (parity testing)", run_logits);

}  // namespace
}  // namespace sanctum::cli
