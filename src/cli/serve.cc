// sanctum serve: the OpenAI-compatible HTTP server.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "cli/args.h"
#include "cli/command.h"
#include "server/serve_main.h"

namespace sanctum::cli {
namespace {

const char* kUsage =
    "usage: sanctum serve --model [NAME=]DIR [--model ...] [--host ADDR ...] [--port N] [--allow-unspecified]\n"
    "                     [--max-queue N] [--stream-flush-tokens N] [--drain-timeout S] [--body-limit BYTES]\n"
    "                     [--default-max-tokens N] [--deep-health-timeout S] [--max-connections N]\n"
    "                     [--keep-alive-timeout S] [--log-format text|json] [--log-level debug|info|warn|error]\n"
    "                     [--no-pld] [--pld-max-draft N] [--pld-ngram N] [--prompt-cache-mb N] [--threads N]\n"
    "OpenAI-compatible server: POST /v1/chat/completions, /v1/completions; GET /v1/models, /health,\n"
    "/health/deep, /metrics. --host is repeatable and defaults to 127.0.0.1 only; a loopback bind must\n"
    "succeed, other addresses that fail are skipped; 0.0.0.0 / :: need --allow-unspecified.\n"
    "SIGTERM/SIGINT drain in-flight requests (up to --drain-timeout seconds, default 30), then exit 0.\n"
    "Prompt-lookup speculation is on unless --no-pld (SANCTUM_PLD_MAX_LOOKUP / SANCTUM_PLD_NGRAM_SIZE\n"
    "override its defaults); --prompt-cache-mb bounds prompt-cache reuse (default 1024, 0 turns it off).\n";

int run_serve(int argc, char** argv) {
  Args args(argc, argv,
            {"model", "host", "port", "max-queue", "stream-flush-tokens", "drain-timeout", "body-limit", "default-max-tokens",
             "deep-health-timeout", "max-connections", "keep-alive-timeout", "log-format", "log-level", "threads",
             "pld-max-draft", "pld-ngram", "prompt-cache-mb"},
            {"allow-unspecified", "help", "no-pld"});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  check(args.has("model"), ErrorKind::invalid_argument, "--model DIR is required\n" + std::string(kUsage));
  const std::string format = args.get_or("log-format", "text");
  check(format == "text" || format == "json", ErrorKind::invalid_argument, "--log-format must be text or json");
  log::set_format(format == "json" ? log::Format::json : log::Format::text);
  const std::string level = args.get_or("log-level", "info");
  if (level == "debug") log::set_level(log::Level::debug);
  else if (level == "warn") log::set_level(log::Level::warn);
  else if (level == "error") log::set_level(log::Level::error);
  else check(level == "info", ErrorKind::invalid_argument, "--log-level must be debug, info, warn or error");
  if (args.has("threads")) set_compute_threads(static_cast<int>(args.get_int("threads", 0)));

  server::ServerOptions opt;
  if (args.has("host")) opt.hosts = args.get_all("host");
  opt.port = static_cast<int>(args.get_int("port", 8080));
  check(opt.port >= 0 && opt.port <= 65535, ErrorKind::invalid_argument, "--port must be in 0..65535");
  opt.allow_unspecified = args.has("allow-unspecified");
  auto positive = [&](const char* flag, long long fallback) {
    long long v = args.get_int(flag, fallback);
    check(v > 0, ErrorKind::invalid_argument, std::string("--") + flag + " must be positive");
    return v;
  };
  opt.max_queue = static_cast<size_t>(positive("max-queue", 16));
  opt.stream_flush_tokens = static_cast<int>(positive("stream-flush-tokens", 1));
  opt.body_limit = static_cast<size_t>(positive("body-limit", 8 << 20));
  opt.default_max_tokens = static_cast<int>(positive("default-max-tokens", 512));
  opt.max_connections = static_cast<size_t>(positive("max-connections", 1024));
  opt.drain_timeout = args.get_double("drain-timeout", 30.0);
  opt.deep_health_timeout = args.get_double("deep-health-timeout", 10.0);
  opt.keep_alive_timeout = args.get_double("keep-alive-timeout", 60.0);
  check(opt.drain_timeout >= 0 && opt.deep_health_timeout > 0 && opt.keep_alive_timeout > 0, ErrorKind::invalid_argument,
        "timeouts must be positive");

  opt.speculate = !args.has("no-pld");
  opt.lookup = spec::with_environment_overrides(opt.lookup);
  opt.lookup.max_draft = static_cast<int>(args.get_int("pld-max-draft", opt.lookup.max_draft));
  opt.lookup.ngram = static_cast<int>(args.get_int("pld-ngram", opt.lookup.ngram));
  check(opt.lookup.max_draft >= 0 && opt.lookup.ngram >= 1, ErrorKind::invalid_argument,
        "--pld-max-draft must be >= 0 and --pld-ngram >= 1");
  const long long cache_mb = args.get_int("prompt-cache-mb", 1024);
  check(cache_mb >= 0, ErrorKind::invalid_argument, "--prompt-cache-mb must be >= 0");
  opt.prompt_cache_bytes = static_cast<size_t>(cache_mb) << 20;

  std::vector<server::ModelSpec> models;
  for (const std::string& m : args.get_all("model")) models.push_back(server::parse_model_spec(m));
  // The signed-manifest gate (--manifest) will register here as a "manifest_verify" check.
  std::vector<server::PreBindCheck> checks;
  return server::run_server(opt, models, checks);
}

SubcommandRegistration reg("serve", "OpenAI-compatible HTTP server (chat, completions, health, metrics)", run_serve);

}  // namespace
}  // namespace sanctum::cli
