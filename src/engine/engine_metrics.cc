#include "engine/engine_metrics.h"

namespace sanctum {

namespace {
std::vector<double> duration_buckets() { return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}; }
}  // namespace

EngineMetrics::EngineMetrics(Registry& registry)
    : inference_requests(registry.counter("sanctum_mlx_inference_requests_total", "Finished generations by stop reason.", {"stop_reason"})),
      completion_tokens_total(registry.counter("sanctum_mlx_inference_completion_tokens_total", "Generated tokens.").with({})),
      prompt_tokens_total(registry.counter("sanctum_mlx_inference_prompt_tokens_total", "Prompt tokens processed.").with({})),
      inference_duration(registry
                             .histogram("sanctum_mlx_inference_duration_seconds",
                                        "Time from the engine taking a request to its last token.", duration_buckets())
                             .with({})),
      tokens_per_sec(registry
                         .histogram("sanctum_mlx_inference_tokens_per_sec", "Decode speed per request (tokens/s).",
                                    {0.5, 1, 2, 4, 8, 16, 32, 64, 96, 128, 256, 512, 1024, 2048, 4096})
                         .with({})),
      completion_tokens(
          registry.histogram("sanctum_mlx_inference_completion_tokens", "Generated tokens per request.", exponential_buckets(1, 2, 13))
              .with({})),
      queue_depth(registry.gauge("sanctum_mlx_inference_queue_depth", "Requests waiting for a model's engine.", {"model"})),
      running_sequences(registry.gauge("sanctum_engine_running_sequences", "Sequences in a model's running batch.", {"model"})),
      state_bytes(registry.gauge("sanctum_engine_state_bytes", "KV cache and recurrent state held by the running sequences.", {"model"})),
      kv_page_bytes(registry
                        .gauge("sanctum_kv_cache_page_bytes",
                               "CPU KV cache memory allocated (running sequences and prompt cache), shared pages counted once.")
                        .with({})),
      kv_shared_page_bytes(registry
                               .gauge("sanctum_kv_cache_shared_page_bytes",
                                      "CPU KV cache pages that more than one sequence or snapshot maps, once per extra holder: "
                                      "what copying would add.")
                               .with({})),
      kv_gpu_granule_bytes(registry
                               .gauge("sanctum_kv_cache_gpu_granule_bytes",
                                      "GPU KV cache memory allocated in granules (running sequences and prompt cache), shared "
                                      "granules counted once.")
                               .with({})),
      kv_gpu_shared_granule_bytes(registry
                                      .gauge("sanctum_kv_cache_gpu_shared_granule_bytes",
                                             "GPU KV cache granules that more than one sequence or snapshot maps, once per extra "
                                             "holder: what copying would add.")
                                      .with({})),
      batch_sequences(
          registry.histogram("sanctum_engine_batch_sequences", "Sequences per forward step.", {1, 2, 4, 8, 16, 32, 64, 128}).with({})),
      batch_tokens(registry.histogram("sanctum_engine_batch_tokens", "Tokens per forward step.", exponential_buckets(1, 2, 14)).with({})),
      step_seconds(registry
                       .histogram("sanctum_engine_step_seconds", "One scheduler step: forward, sampling and token hand-off.",
                                  {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})
                       .with({})),
      prompt_cache_lookups(registry.counter("sanctum_mlx_prompt_cache_lookups_total", "Prompt-cache lookups by result.", {"result"})),
      prompt_cache_tokens(
          registry.counter("sanctum_mlx_prompt_cache_tokens_total", "Prompt tokens served from the prompt cache instead of prefilled.")
              .with({})),
      prompt_cache_bytes(registry.gauge("sanctum_mlx_prompt_cache_bytes", "Bytes held by prompt-cache snapshots.").with({})),
      tail_snapshots(registry
                         .counter("sanctum_prompt_cache_tail_snapshots_total",
                                  "End-of-generation snapshots stored (hybrid models, built while the engine is idle).")
                         .with({})),
      tail_snapshot_tokens(registry
                               .counter("sanctum_prompt_cache_tail_snapshot_tokens_total",
                                        "Tokens prefilled while idle to build end-of-generation snapshots.")
                               .with({})),
      tail_snapshots_pending(
          registry.gauge("sanctum_prompt_cache_tail_snapshots_pending", "End-of-generation snapshots waiting for an idle engine.")
              .with({})),
      pld_drafted_tokens(
          registry.counter("sanctum_mlx_pld_drafted_tokens_total", "Prompt-lookup speculation: draft tokens proposed.").with({})),
      pld_accepted_tokens(
          registry.counter("sanctum_mlx_pld_accepted_tokens_total", "Prompt-lookup speculation: draft tokens accepted.").with({})) {}

}  // namespace sanctum
