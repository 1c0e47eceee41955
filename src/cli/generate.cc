// sanctum generate: one-shot generation in the terminal.
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "base/error.h"
#include "base/mapped_file.h"
#include "base/thread_pool.h"
#include "chat/prompt_builder.h"
#include "cli/adapter_flags.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "cli/generate_batch.h"
#include "cli/ids.h"
#include "engine/cached_generation.h"
#include "model/default_model.h"
#include "model/model.h"
#include "ops/precision.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::cli {
namespace {

const char* kUsage =
    "usage: sanctum generate [--model DIR] (--prompt-ids 1,2,3 | --prompts-file FILE | --prompt TEXT | --chat TEXT)\n"
    "                        [--max-tokens N] [--temperature T] [--top-p P]\n"
    "                        [--top-k K] [--min-p P] [--repetition-penalty R] [--seed S] [--ignore-eos]\n"
    "                        [--no-pld] [--pld-always] [--pld-max-draft N] [--pld-ngram N] [--prompt-cache-mb N]\n"
    "                        [--matmul-precision f32|int8|bf16] [--device cpu|cuda] [--gpu-memory-limit-mb N]\n"
    "                        [--kv-cache-dtype f32|bf16|q8|q4v]\n"
    "                        [--threads N] [--timing] [--parallel N] [--adapter DIR]\n"
    "       sanctum generate --model DIR --prompts-file FILE ...   (one comma-separated prompt per line;\n"
    "                                                              line i samples with seed + i)\n"
    "Token-id input prints the generated ids, comma-separated, one stdout line per prompt; --prompt (raw\n"
    "text) and --chat (one user message through the model's chat template) print the generated text.\n"
    "Without --model the embedded default model is used. --adapter merges a LoRA / DoRA adapter (mlx-lm\n"
    "or PEFT format) into the model's weights at load.\n"
    "Prompt-lookup speculation is on unless --no-pld, drafting only while its measured cost pays\n"
    "(--pld-always drafts at every step).\n"
    "--prompt-cache-mb N shares a prompt cache among the prompts of a --prompts-file; on hybrid models\n"
    "each output is followed by the end-of-generation snapshot that the next turn continues from\n"
    "(built after the output is printed; --timing reports it on its own line).\n"
    "--parallel N runs a --prompts-file through the server's engine, up to N sequences per forward; its\n"
    "lines may end in '|max_tokens=K,n=C,cancel_after=K,delay_ms=D' (src/cli/generate_batch.h).\n";

int run_generate(int argc, char** argv) {
  Args args(argc, argv,
            {"model",
             "prompt-ids",
             "prompts-file",
             "prompt",
             "chat",
             "max-tokens",
             "temperature",
             "top-p",
             "top-k",
             "min-p",
             "repetition-penalty",
             "seed",
             "threads",
             "pld-max-draft",
             "pld-ngram",
             "prompt-cache-mb",
             "parallel",
             "matmul-precision",
             kKvCacheDtypeFlag,
             kDeviceFlag,
             kGpuMemoryLimitFlag,
             kTuneFlag,
             kAdapterFlag},
            {"ignore-eos", "timing", "help", "no-pld", "pld-always"});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const int inputs = args.has("prompt-ids") + args.has("prompts-file") + args.has("prompt") + args.has("chat");
  check(inputs == 1, ErrorKind::invalid_argument,
        "give exactly one of --prompt-ids, --prompts-file, --prompt or --chat\n" + std::string(kUsage));
  const std::string model_dir = args.has("model") ? *args.get("model") : default_model_dir();
  const bool text_io = args.has("prompt") || args.has("chat");
  if (args.has("threads")) set_compute_threads(static_cast<int>(args.get_int("threads", 0)));
  if (args.has("matmul-precision")) ops::set_matmul_precision(ops::parse_matmul_precision(*args.get("matmul-precision")));
  const Device device = apply_device_flags(args);

  GenerationParams params;
  params.max_tokens = static_cast<int>(args.get_int("max-tokens", 128));
  params.ignore_eos = args.has("ignore-eos");
  params.sampling.temperature = static_cast<float>(args.get_double("temperature", 0.0));
  params.sampling.top_p = static_cast<float>(args.get_double("top-p", 1.0));
  params.sampling.top_k = static_cast<int>(args.get_int("top-k", 0));
  params.sampling.min_p = static_cast<float>(args.get_double("min-p", 0.0));
  params.sampling.repetition_penalty = static_cast<float>(args.get_double("repetition-penalty", 1.0));
  params.sampling.seed = static_cast<uint64_t>(args.get_int("seed", 0));
  params.speculate = !args.has("no-pld");
  params.lookup.max_draft = static_cast<int>(args.get_int("pld-max-draft", params.lookup.max_draft));
  params.lookup.ngram = static_cast<int>(args.get_int("pld-ngram", params.lookup.ngram));
  params.lookup.always = args.has("pld-always");
  check(params.lookup.max_draft >= 0 && params.lookup.ngram >= 1, ErrorKind::invalid_argument,
        "--pld-max-draft must be >= 0 and --pld-ngram >= 1");

  const long long cache_mb = args.get_int("prompt-cache-mb", 0);
  check(cache_mb >= 0, ErrorKind::invalid_argument, "--prompt-cache-mb must be >= 0");
  if (args.has("parallel")) {
    check(args.has("prompts-file"), ErrorKind::invalid_argument, "--parallel needs --prompts-file");
    const long long parallel = args.get_int("parallel", 1);
    check(parallel >= 1 && parallel <= 4096, ErrorKind::invalid_argument, "--parallel must be in 1..4096");
    std::vector<BatchPrompt> batch;
    std::istringstream lines(read_file(*args.get("prompts-file")));
    for (std::string line; std::getline(lines, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos) batch.push_back(parse_batch_line(line));
    run_batched(load_model(model_dir, device, tuning_from_flags(args), nullptr, adapter_from_flags(args)), batch, params,
                static_cast<int>(parallel), static_cast<size_t>(cache_mb) << 20, args.has("timing"));
    return 0;
  }

  std::vector<std::vector<int32_t>> prompts;
  std::unique_ptr<Tokenizer> tokenizer;
  if (text_io) {
    tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(model_dir));
    // Built as the server builds them: one conversation or text gives the same ids in both.
    if (args.has("prompt")) prompts.push_back(text_prompt(*tokenizer, *args.get("prompt")));
    else prompts.push_back(PromptBuilder(*tokenizer).chat(user_turn(*args.get("chat")), nlohmann::json::object()).ids);
    for (int32_t id : tokenizer->eos_ids()) params.stop_ids.push_back(id);
  } else if (args.has("prompt-ids")) {
    prompts.push_back(parse_ids(*args.get("prompt-ids")));
  } else {
    std::istringstream lines(read_file(*args.get("prompts-file")));
    for (std::string line; std::getline(lines, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos) prompts.push_back(parse_ids(line));
  }
  std::unique_ptr<PrefixCache> cache;  // shared by the prompts of a --prompts-file, in order
  if (cache_mb > 0) cache = std::make_unique<PrefixCache>(static_cast<size_t>(cache_mb) << 20);
  auto model = load_model(model_dir, device, tuning_from_flags(args), nullptr, adapter_from_flags(args));
  spec::SpeculationStats speculation_stats;  // learned across the prompts of this run
  params.speculation_stats = &speculation_stats;
  const uint64_t seed = params.sampling.seed;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& prompt = prompts[i];
    params.sampling.seed = seed + i;  // each prompt line has its own stream: seed, seed + 1, ...
    int64_t reused = 0;
    std::unique_ptr<TailSnapshot> tail;  // hybrid models: the end-of-generation snapshot, built below
    GenerationResult r = generate_with_cache(*model, cache.get(), prompt, params, {}, &reused, &tail);
    if (text_io) {
      std::vector<int32_t> out = r.tokens;
      if (r.finish == FinishReason::stop && !out.empty()) out.pop_back();  // the stop token itself
      std::printf("%s\n", tokenizer->decode(out, /*skip_special_tokens=*/true).c_str());
    } else {
      std::printf("%s\n", format_ids(r.tokens).c_str());
    }
    if (args.has("timing")) {
      double decode_tps = r.tokens.size() > 1 ? static_cast<double>(r.tokens.size() - 1) / r.decode_seconds : 0.0;
      std::fprintf(
          stderr,
          "prompt %lld tokens (%lld from cache) in %.3f s (%.1f tok/s); %zu generated, decode %.1f tok/s; drafted %lld, accepted %lld; "
          "finish=%s\n",
          static_cast<long long>(r.prompt_tokens), static_cast<long long>(reused), r.prefill_seconds,
          static_cast<double>(r.prompt_tokens - reused) / r.prefill_seconds, r.tokens.size(), decode_tps,
          static_cast<long long>(r.drafted_tokens), static_cast<long long>(r.accepted_tokens), finish_reason_name(r.finish));
    }
    if (tail && i + 1 < prompts.size()) {  // between prompts, where a server does it while idle: in no prompt's timing
      std::fflush(stdout);
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t from = tail->position();
      const bool stored = tail->finish(*model, *cache);
      if (args.has("timing"))
        std::fprintf(stderr, "end-of-generation snapshot at %lld tokens (prefill from %lld) in %.3f s%s\n",
                     static_cast<long long>(tail->target()), static_cast<long long>(from),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), stored ? "" : " (not kept)");
    }
  }
  return 0;
}

SubcommandRegistration reg("generate", "one-shot generation (token ids in and out)", run_generate);

}  // namespace
}  // namespace sanctum::cli
