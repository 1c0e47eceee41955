// sanctum generate: one-shot generation in the terminal.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/ids.h"
#include "engine/generator.h"
#include "model/model.h"

namespace sanctum::cli {
namespace {

const char* kUsage =
    "usage: sanctum generate --model DIR --prompt-ids 1,2,3 [--max-tokens N] [--temperature T] [--top-p P]\n"
    "                        [--top-k K] [--min-p P] [--repetition-penalty R] [--seed S] [--ignore-eos]\n"
    "                        [--threads N] [--timing]\n"
    "Prints the generated token ids, comma-separated, on one stdout line.\n";

int run_generate(int argc, char** argv) {
  Args args(argc, argv,
            {"model", "prompt-ids", "max-tokens", "temperature", "top-p", "top-k", "min-p", "repetition-penalty", "seed", "threads"},
            {"ignore-eos", "timing", "help"});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  check(args.has("model"), ErrorKind::invalid_argument, "--model DIR is required\n" + std::string(kUsage));
  check(args.has("prompt-ids"), ErrorKind::invalid_argument, "--prompt-ids is required (text prompts need a tokenizer)\n" + std::string(kUsage));
  if (args.has("threads")) set_compute_threads(static_cast<int>(args.get_int("threads", 0)));

  GenerationParams params;
  params.max_tokens = static_cast<int>(args.get_int("max-tokens", 128));
  params.ignore_eos = args.has("ignore-eos");
  params.sampling.temperature = static_cast<float>(args.get_double("temperature", 0.0));
  params.sampling.top_p = static_cast<float>(args.get_double("top-p", 1.0));
  params.sampling.top_k = static_cast<int>(args.get_int("top-k", 0));
  params.sampling.min_p = static_cast<float>(args.get_double("min-p", 0.0));
  params.sampling.repetition_penalty = static_cast<float>(args.get_double("repetition-penalty", 1.0));
  params.sampling.seed = static_cast<uint64_t>(args.get_int("seed", 0));

  std::vector<int32_t> prompt = parse_ids(*args.get("prompt-ids"));
  auto model = load_model(*args.get("model"));
  SequenceState state = model->new_state();
  GenerationResult r = generate(*model, state, prompt, params);
  std::printf("%s\n", format_ids(r.tokens).c_str());
  if (args.has("timing")) {
    double decode_tps = r.tokens.size() > 1 ? static_cast<double>(r.tokens.size() - 1) / r.decode_seconds : 0.0;
    std::fprintf(stderr, "prompt %lld tokens in %.3f s (%.1f tok/s); %zu generated, decode %.1f tok/s; finish=%s\n",
                 static_cast<long long>(r.prompt_tokens), r.prefill_seconds,
                 static_cast<double>(r.prompt_tokens) / r.prefill_seconds, r.tokens.size(), decode_tps,
                 finish_reason_name(r.finish));
  }
  return 0;
}

SubcommandRegistration reg("generate", "one-shot generation (token ids in and out)", run_generate);

}  // namespace
}  // namespace sanctum::cli
