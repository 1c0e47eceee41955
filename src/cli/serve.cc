// sanctum serve: the OpenAI-compatible HTTP server.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "cli/log_flags.h"
#include "grammar/grammar_cache.h"
#include "model/default_model.h"
#include "ops/precision.h"
#include "security/gate.h"
#include "server/serve_main.h"

namespace sanctum::cli {
namespace {

const char* kUsage =
    "usage: sanctum serve [--model [NAME=]DIR ...] [--host ADDR ...] [--port N] [--allow-unspecified]\n"
    "                     [--max-queue N] [--max-seqs N] [--max-batch-tokens N] [--kv-cache-mb N]\n"
    "                     [--memory-limit-mb N]\n"
    "                     [--stream-flush-tokens N]\n"
    "                     [--drain-timeout S] [--body-limit BYTES]\n"
    "                     [--default-max-tokens N] [--deep-health-timeout S] [--max-connections N]\n"
    "                     [--keep-alive-timeout S] [--log-format text|json] [--log-level debug|info|warn|error]\n"
    "                     [--no-pld] [--pld-max-draft N] [--pld-ngram N] [--prompt-cache-mb N] [--grammar-cache-mb N]\n"
    "                     [--threads N]\n"
    "                     [--prefill-chunk N] [--matmul-precision f32|int8|bf16] [--device cpu|cuda]\n"
    "                     [--kv-cache-dtype f32|bf16|q8|q4v]\n"
    "                     [--max-image-pixels N] [--max-images-per-request N] [--allow-image-urls]\n"
    "                     [--gpu-memory-limit-mb N] [--tune KEY=VALUE,...] [--tool-parser NAME|none]\n"
    "                     [--manifest M [--manifest-sig S] [--manifest-pubkey P]]\n"
    "                     [--adapter [NAME=]ADAPTER_DIR ...] [--adapter-manifest M [--adapter-manifest-sig S]\n"
    "                      [--adapter-manifest-pubkey P]]\n"
    "                     [--tls-cert C --tls-key K --tls-client-ca CA [--tls-crl CRL] [--tls-host ADDR ...]\n"
    "                      [--tls-port N] [--no-plain]] [--auth-token-file F [--auth-loopback-bypass]]\n"
    "                     [--lora [MODEL:]NAME=ADAPTER_DIR ...] [--lora-list FILE] [--max-loras N]\n"
    "                      [--max-lora-rank N] [--lora-manifest [--lora-manifest-pubkey P]]\n"
    "                      [--admin [--admin-identity CN ...]]\n"
    "                     [--no-ui]\n"
    "OpenAI-compatible server: POST /v1/chat/completions, /v1/completions; GET /v1/models, /health,\n"
    "/health/deep, /metrics; a chat page at GET / (--no-ui turns it off). --host is repeatable and\n"
    "defaults to 127.0.0.1 only; a loopback bind must succeed, other addresses that fail are skipped;\n"
    "0.0.0.0 / :: need --allow-unspecified.\n"
    "SIGTERM/SIGINT drain in-flight requests (up to --drain-timeout seconds, default 30), then exit 0.\n"
    "Prompt-lookup speculation is on unless --no-pld (--pld-max-draft / --pld-ngram set its limits);\n"
    "--prompt-cache-mb bounds prompt-cache reuse (default 1024, 0 turns it off). --grammar-cache-mb\n"
    "bounds each model's compiled grammars (response_format, tools) and their token masks (default 256;\n"
    "0 keeps only the grammar in use; a smaller bound also caps each grammar's masks).\n"
    "Images (vision models): each at most --max-image-pixels decoded pixels (default 16777216, the\n"
    "Qwen3-VL/Qwen3.5 processors' own bound), at most --max-images-per-request per request (default 8);\n"
    "remote http(s) image URLs are refused unless --allow-image-urls (then fetched, 10 s and 20 MiB each).\n"
    "Concurrent requests run as one batch per model: --max-seqs sequences at once (default 16 on the\n"
    "CPU, 64 on a GPU; a request with n > 1 takes n), each step at most --max-batch-tokens tokens (default:\n"
    "the prefill chunk), decode tokens first, so a long prompt delays running streams by one piece;\n"
    "--kv-cache-mb bounds the running sequences' KV cache and recurrent state, each counted at its\n"
    "longest (prompt + max_tokens): new requests wait while it is full, one that cannot fit even alone\n"
    "is a 400, and a max_tokens left to the server shrinks to fit (default 0: no bound);\n"
    "--memory-limit-mb bounds the whole: what the process itself (measured once the models are loaded)\n"
    "and each model's weights and scratch leave goes an eighth (at most 256 MiB) to its grammar cache,\n"
    "a quarter of the rest to its prompt cache and the rest to --kv-cache-mb, unless those are given\n"
    "(with neither of the last two given, the prompt cache gives its share back before a request\n"
    "waits); startup fails when the process and the weights alone do not fit. The plan is logged\n"
    "(\"memory plan\") and shown on /health.\n"
    "--max-queue more requests wait (default 16), beyond that 429.\n"
    "--prefill-chunk sets the prompt tokens per forward (default: the model's, 512 on the CPU, 4096 on a\n"
    "GPU): smaller pieces bound a prefill's scratch memory, larger ones spend less per forward.\n"
    "--matmul-precision: how quantized weights multiply. The default is the device's fast path: int8\n"
    "activations on a CPU with AVX-512 VNNI (2-4x the speed of f32; greedy answers matched f32's on the\n"
    "default model's held-out prompts, bench/RESULTS.md), f32 on other CPUs, bf16 tensor-core prefill on\n"
    "a GPU. f32 is the exact path (what the parity suites check); SANCTUM_MATMUL_PRECISION sets it too.\n"
    "--lora NAME=DIR (MODEL:NAME=DIR with several --model) loads an adapter beside the unmodified base;\n"
    "a request picks it with \"model\": \"MODEL:NAME\", and /v1/models lists it. --lora-list FILE holds\n"
    "more, one [MODEL:]NAME=DIR a line; SIGHUP re-reads it with the --lora flags and applies the\n"
    "difference (a bad adapter leaves the old set serving). --max-loras N: adapters resident per model\n"
    "(default: as many as given, at least 4 with --admin; more given is a start-up error).\n"
    "--max-lora-rank N refuses adapters of a larger rank (default 64). Unmerged adapters run on the CPU\n"
    "only, and DoRA and MoE routed-expert targets are served merged only (--adapter).\n"
    "--lora-manifest: every such adapter, at start-up, on SIGHUP and through /admin, must match the\n"
    "adapter.sha256 in its directory (sanctum manifest generate DIR), signed as adapter.sha256.sig\n"
    "when --lora-manifest-pubkey is given; the adapter is read from the files the check hashed.\n"
    "--admin adds GET/POST /admin/adapters (load, unload, replace), which take the --auth-token-file\n"
    "token or an mTLS client whose CN --admin-identity names.\n"
    "--kv-cache-dtype: how the KV cache stores keys and values. bf16 (the default on both devices)\n"
    "halves f32's bytes per token with logits within bf16 rounding of f32's; q8 (8-bit codes, a scale\n"
    "per 32 values) takes about a quarter and q4v (8-bit keys, 4-bit values) about a fifth, on both\n"
    "devices, at the accuracy cost in bench/RESULTS.md (\"KV cache dtypes\"); f32 is the exact path\n"
    "for parity runs. --kv-cache-mb counts the chosen dtype's bytes; SANCTUM_KV_CACHE_DTYPE sets it too.\n"
    "--manifest (one per --model, in order) verifies the model directory before any weight is read or\n"
    "socket bound: the Ed25519 signature (--manifest-sig, default M.sig, checked with --manifest-pubkey,\n"
    "one key for all or one per manifest), then every file's SHA-256; any failure exits non-zero.\n"
    "--adapter NAME=DIR merges a LoRA / DoRA adapter (mlx-lm adapters.safetensors or PEFT\n"
    "adapter_model.safetensors, with adapter_config.json) into the model named NAME as it loads; one per\n"
    "model (a bare DIR when there is one --model). --adapter-manifest (one per --adapter, in order; with\n"
    "--adapter-manifest-sig / --adapter-manifest-pubkey as for --manifest) verifies the adapter directory\n"
    "the same way before bind, and the merge reads the files it hashed.\n"
    "--tls-* adds an mTLS listener (default 127.0.0.1:8443; client certificates from --tls-client-ca are\n"
    "required, their CN is logged as the request's identity; SIGHUP reloads certificates and CRL);\n"
    "--no-plain drops the plain listener. --auth-token-file (mode 0600) requires Authorization: Bearer\n"
    "on the plain listener (GET /health stays open); loopback clients skip it only with\n"
    "--auth-loopback-bypass.\n"
    "--device puts every --model on that device (default cpu); cuda fails at start-up when this binary\n"
    "has no CUDA backend or no GPU is usable. --gpu-memory-limit-mb caps GPU memory (0: no cap).\n"
    "--tool-parser sets how tool calls are read from every model's output: qwen_xml (<function=...>),\n"
    "hermes (JSON in <tool_call>), mistral ([TOOL_CALLS]) or none (requests with tools get a 400); by\n"
    "default each model's is detected from its chat template and vocabulary.\n";

// The check that verifies `dir` against `manifest` before bind and hands the files it hashed, still
// open, to the load through `verified`.
server::PreBindCheck manifest_check(const std::string& phase, const std::string& dir, const std::string& manifest,
                                    const std::optional<std::string>& sig, const std::optional<std::string>& key, const std::string& model,
                                    std::shared_ptr<PinnedFiles> verified) {
  return {phase, [phase, dir, manifest, sig, key, model, verified] {
            security::VerifyReport r = security::verify_model_against_manifest(dir, manifest, sig, key);
            *verified = std::move(r.pinned);
            char rate[32];
            std::snprintf(rate, sizeof rate, "%.2f", r.gb_per_s());
            log::info(phase == "manifest_verify" ? "manifest verified" : "adapter manifest verified",
                      {{"model", model},
                       {"dir", dir},
                       {"manifest", manifest},
                       {"signature", r.signature_checked ? r.key_fingerprint : "unsigned"},
                       {"files", std::to_string(r.files)},
                       {"bytes", std::to_string(r.bytes)},
                       {"threads", std::to_string(r.threads)},
                       {"gb_per_s", rate}});
            if (!r.signature_checked)
              log::warn(phase == "manifest_verify" ? "manifest is not signature-checked (no --manifest-pubkey)"
                                                   : "adapter manifest is not signature-checked (no --adapter-manifest-pubkey)",
                        {{"manifest", manifest}});
          }};
}

// One check per manifest flag (`flag`, with `flag`-sig and `flag`-pubkey), paired in order with
// `dirs` (the models, or the adapters); `slots` receive the pinned files.
std::vector<server::PreBindCheck> manifest_checks(const Args& args, const std::string& flag, const std::string& phase,
                                                  const std::vector<std::pair<std::string, std::string>>& dirs,  // (model, dir)
                                                  const std::vector<std::shared_ptr<PinnedFiles>*>& slots, const std::string& what) {
  const std::vector<std::string> manifests = args.get_all(flag);
  const std::vector<std::string> sigs = args.get_all(flag + "-sig");
  const std::vector<std::string> keys = args.get_all(flag + "-pubkey");
  std::vector<server::PreBindCheck> checks;
  if (manifests.empty()) {
    check(sigs.empty() && keys.empty(), ErrorKind::invalid_argument, "--" + flag + "-sig / --" + flag + "-pubkey need --" + flag);
    return checks;
  }
  check(manifests.size() == dirs.size(), ErrorKind::invalid_argument,
        "give one --" + flag + " per --" + what + " (in the same order): " + std::to_string(dirs.size()) + " " + what + "s, " +
            std::to_string(manifests.size()) + " manifests");
  check(sigs.empty() || sigs.size() == manifests.size(), ErrorKind::invalid_argument, "give one --" + flag + "-sig per --" + flag);
  check(keys.size() <= 1 || keys.size() == manifests.size(), ErrorKind::invalid_argument,
        "give one --" + flag + "-pubkey for all manifests or one per --" + flag);
  for (size_t i = 0; i < manifests.size(); ++i) {
    const std::optional<std::string> sig = sigs.empty() ? std::nullopt : std::optional<std::string>(sigs[i]);
    const std::optional<std::string> key = keys.empty() ? std::nullopt : std::optional<std::string>(keys.size() == 1 ? keys[0] : keys[i]);
    *slots[i] = std::make_shared<PinnedFiles>();
    checks.push_back(manifest_check(phase, dirs[i].second, manifests[i], sig, key, dirs[i].first, *slots[i]));
  }
  return checks;
}

// --adapter NAME=DIR (or DIR when there is one model): the adapter merged into the model named NAME
// at load. One per model: stacking two adapters on one model is refused. Returns the models' indices
// in --adapter order, which --adapter-manifest follows.
std::vector<size_t> attach_adapters(const Args& args, std::vector<server::ModelSpec>& models) {
  std::vector<size_t> order;
  for (const std::string& a : args.get_all("adapter")) {
    const size_t eq = a.find('=');
    std::string name, dir = a;
    if (eq != std::string::npos && eq > 0) {
      name = a.substr(0, eq);
      dir = a.substr(eq + 1);
    } else {
      check(models.size() == 1, ErrorKind::invalid_argument,
            "--adapter " + a + ": with several --model, name the one it applies to: --adapter NAME=ADAPTER_DIR");
      name = models[0].id;
    }
    check(!dir.empty(), ErrorKind::invalid_argument, "--adapter " + a + ": expected NAME=ADAPTER_DIR");
    std::string names;
    size_t i = 0;
    for (; i < models.size() && models[i].id != name; ++i) names += (names.empty() ? "" : ", ") + models[i].id;
    check(i < models.size(), ErrorKind::invalid_argument,
          "--adapter " + a + ": no --model is named '" + name + "' (models: " + names + ")");
    check(models[i].adapter_dir.empty(), ErrorKind::invalid_argument,
          "--adapter " + a + ": model '" + name + "' already has the adapter " + models[i].adapter_dir +
              "; one adapter per model (to serve both, give the model twice under two names)");
    models[i].adapter_dir = dir;
    order.push_back(i);
  }
  return order;
}

// --manifest (one per --model) and --adapter-manifest (one per --adapter), each paired in order.
std::vector<server::PreBindCheck> manifest_checks(const Args& args, std::vector<server::ModelSpec>& models,
                                                  const std::vector<size_t>& adapter_order) {
  std::vector<std::pair<std::string, std::string>> model_dirs, adapter_dirs;
  std::vector<std::shared_ptr<PinnedFiles>*> model_slots, adapter_slots;
  for (server::ModelSpec& m : models) {
    model_dirs.emplace_back(m.id, m.dir);
    model_slots.push_back(&m.verified);
  }
  for (size_t i : adapter_order) {
    adapter_dirs.emplace_back(models[i].id, models[i].adapter_dir);
    adapter_slots.push_back(&models[i].adapter_verified);
  }
  std::vector<server::PreBindCheck> checks = manifest_checks(args, "manifest", "manifest_verify", model_dirs, model_slots, "model");
  for (auto& c : manifest_checks(args, "adapter-manifest", "adapter_manifest_verify", adapter_dirs, adapter_slots, "adapter"))
    checks.push_back(std::move(c));
  return checks;
}

server::ListenerSecurity listener_security(const Args& args) {
  server::ListenerSecurity sec;
  sec.plain = !args.has("no-plain");
  const bool tls = args.has("tls-cert") || args.has("tls-key") || args.has("tls-client-ca") || args.has("tls-crl") ||
                   args.has("tls-host") || args.has("tls-port");
  if (tls) {
    server::TlsFiles files;
    files.cert = args.get_or("tls-cert", "");
    files.key = args.get_or("tls-key", "");
    files.client_ca = args.get_or("tls-client-ca", "");
    files.crl = args.get_or("tls-crl", "");
    check(!files.cert.empty() && !files.key.empty() && !files.client_ca.empty(), ErrorKind::invalid_argument,
          "the mTLS listener needs --tls-cert, --tls-key and --tls-client-ca (client certificates are always required)");
    sec.tls = std::make_shared<server::TlsContext>(files);
    if (args.has("tls-host")) sec.tls_hosts = args.get_all("tls-host");
    sec.tls_port = static_cast<int>(args.get_int("tls-port", 8443));
    check(sec.tls_port >= 0 && sec.tls_port <= 65535, ErrorKind::invalid_argument, "--tls-port must be in 0..65535");
  }
  check(sec.plain || tls, ErrorKind::invalid_argument, "--no-plain leaves no listener: configure the mTLS one (--tls-cert ...)");
  if (args.has("auth-token-file")) {
    check(sec.plain, ErrorKind::invalid_argument,
          "--auth-token-file protects the plain listener, which --no-plain turns off; drop one of them");
    sec.auth = server::BearerAuth::from_file(*args.get("auth-token-file"), args.has("auth-loopback-bypass"));
  } else {
    check(!args.has("auth-loopback-bypass"), ErrorKind::invalid_argument, "--auth-loopback-bypass needs --auth-token-file");
  }
  return sec;
}

int run_serve(int argc, char** argv) {
  // clang-format off
  Args args(argc, argv,
            {"model", "host", "port", "max-queue", "max-seqs", "max-batch-tokens", "kv-cache-mb", "memory-limit-mb", "stream-flush-tokens", "drain-timeout", "body-limit", "default-max-tokens",
             "deep-health-timeout", "max-connections", "keep-alive-timeout", "log-format", "log-level", "threads",
             "pld-max-draft", "pld-ngram", "prompt-cache-mb", "grammar-cache-mb", "manifest", "manifest-sig", "manifest-pubkey", "adapter", "adapter-manifest",
             "adapter-manifest-sig", "adapter-manifest-pubkey", "tls-cert",
             "tls-key", "tls-client-ca", "tls-crl", "tls-host", "tls-port", "auth-token-file", "prefill-chunk", "matmul-precision", kKvCacheDtypeFlag, kDeviceFlag, kTuneFlag,
             kGpuMemoryLimitFlag, "tool-parser", "max-image-pixels", "max-images-per-request",
             "lora", "lora-list", "max-loras", "max-lora-rank", "admin-identity", "lora-manifest-pubkey"},
            {"allow-unspecified", "help", "no-pld", "no-plain", "auth-loopback-bypass", "no-ui", "allow-image-urls", "admin", "lora-manifest"});
  // clang-format on
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  apply_log_flags(args);
  if (args.has("threads")) set_compute_threads(static_cast<int>(args.get_int("threads", 0)));

  if (args.has("matmul-precision")) ops::set_matmul_precision(ops::parse_matmul_precision(*args.get("matmul-precision")));
  server::ServerOptions opt;
  opt.device = apply_device_flags(args);
  opt.tuning = tuning_from_flags(args);
  if (args.has("host")) opt.hosts = args.get_all("host");
  opt.port = static_cast<int>(args.get_int("port", 8080));
  check(opt.port >= 0 && opt.port <= 65535, ErrorKind::invalid_argument, "--port must be in 0..65535");
  opt.allow_unspecified = args.has("allow-unspecified");
  opt.ui = !args.has("no-ui");
  auto positive = [&](const char* flag, long long fallback) {
    long long v = args.get_int(flag, fallback);
    check(v > 0, ErrorKind::invalid_argument, std::string("--") + flag + " must be positive");
    return v;
  };
  opt.max_queue = static_cast<size_t>(positive("max-queue", 16));
  opt.max_seqs = static_cast<int>(std::min<long long>(positive("max-seqs", opt.device == Device::cuda ? 64 : 16), 4096));
  const long long kv_mb = args.get_int("kv-cache-mb", 0);
  check(kv_mb >= 0, ErrorKind::invalid_argument, "--kv-cache-mb must be >= 0");
  opt.state_bytes = static_cast<size_t>(kv_mb) << 20;
  opt.state_bytes_given = args.has("kv-cache-mb");
  const long long limit_mb = args.get_int("memory-limit-mb", 0);
  check(limit_mb >= 0, ErrorKind::invalid_argument, "--memory-limit-mb must be >= 0");
  opt.memory_limit_bytes = static_cast<size_t>(limit_mb) << 20;
  if (args.has("max-batch-tokens")) opt.max_batch_tokens = std::min<long long>(positive("max-batch-tokens", 0), 1 << 20);
  opt.stream_flush_tokens = static_cast<int>(positive("stream-flush-tokens", 1));
  opt.body_limit = static_cast<size_t>(positive("body-limit", 8 << 20));
  opt.default_max_tokens = static_cast<int>(positive("default-max-tokens", 512));
  if (args.has("prefill-chunk")) opt.prefill_chunk = static_cast<int>(std::min<long long>(positive("prefill-chunk", 0), 1 << 30));
  opt.max_connections = static_cast<size_t>(positive("max-connections", 1024));
  opt.drain_timeout = args.get_double("drain-timeout", 30.0);
  opt.deep_health_timeout = args.get_double("deep-health-timeout", 10.0);
  opt.keep_alive_timeout = args.get_double("keep-alive-timeout", 60.0);
  check(opt.drain_timeout >= 0 && opt.deep_health_timeout > 0 && opt.keep_alive_timeout > 0, ErrorKind::invalid_argument,
        "timeouts must be positive");

  opt.speculate = !args.has("no-pld");
  opt.lookup.max_draft = static_cast<int>(args.get_int("pld-max-draft", opt.lookup.max_draft));
  opt.lookup.ngram = static_cast<int>(args.get_int("pld-ngram", opt.lookup.ngram));
  check(opt.lookup.max_draft >= 0 && opt.lookup.ngram >= 1, ErrorKind::invalid_argument,
        "--pld-max-draft must be >= 0 and --pld-ngram >= 1");
  const long long cache_mb = args.get_int("prompt-cache-mb", 1024);
  check(cache_mb >= 0, ErrorKind::invalid_argument, "--prompt-cache-mb must be >= 0");
  opt.prompt_cache_bytes = static_cast<size_t>(cache_mb) << 20;
  opt.prompt_cache_given = args.has("prompt-cache-mb");
  const long long grammar_mb = args.get_int("grammar-cache-mb", static_cast<long long>(grammar::CompiledGrammarCache::kDefaultBytes >> 20));
  check(grammar_mb >= 0, ErrorKind::invalid_argument, "--grammar-cache-mb must be >= 0");
  opt.grammar_cache_bytes = static_cast<size_t>(grammar_mb) << 20;
  opt.grammar_cache_given = args.has("grammar-cache-mb");
  opt.images.limits.max_pixels = positive("max-image-pixels", image::kDefaultMaxImagePixels);
  opt.images.max_images_per_request =
      static_cast<int>(std::min<long long>(positive("max-images-per-request", server::kDefaultMaxImagesPerRequest), 1 << 16));
  opt.images.allow_urls = args.has("allow-image-urls");

  if (args.has("tool-parser")) {
    const std::string name = *args.get("tool-parser");
    opt.tool_parser = tool_parser_from_name(name);
    check(opt.tool_parser.has_value(), ErrorKind::invalid_argument,
          "--tool-parser " + name + ": expected qwen_xml, hermes, mistral or none");
  }

  std::vector<server::ModelSpec> models;
  for (const std::string& m : args.get_all("model")) models.push_back(server::parse_model_spec(m));
  if (models.empty()) models.push_back(server::parse_model_spec("default=" + default_model_dir()));  // the embedded model
  const std::vector<size_t> adapters = attach_adapters(args, models);
  std::vector<server::PreBindCheck> checks = manifest_checks(args, models, adapters);
  server::ListenerSecurity security = listener_security(args);
  opt.loras = args.get_all("lora");
  opt.lora_list = args.get_or("lora-list", "");
  if (args.has("max-loras")) opt.max_loras = positive("max-loras", 1);
  opt.max_lora_rank = positive("max-lora-rank", 64);
  opt.lora_gate.required = args.has("lora-manifest") || args.has("lora-manifest-pubkey");
  opt.lora_gate.public_key = args.get_or("lora-manifest-pubkey", "");
  opt.admin = args.has("admin");
  opt.admin_identities = args.get_all("admin-identity");
  check(opt.admin || opt.admin_identities.empty(), ErrorKind::invalid_argument, "--admin-identity needs --admin");
  if (security.auth) opt.admin_token = std::make_shared<const server::BearerAuth>(*security.auth);
  return server::run_server(opt, models, checks, std::move(security));
}

SubcommandRegistration reg("serve", "OpenAI-compatible HTTP server (chat, completions, health, metrics)", run_serve);

}  // namespace
}  // namespace sanctum::cli
