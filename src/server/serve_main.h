#pragma once
// `sanctum serve` start-up and shutdown, in order: pre-bind checks (the signed-manifest gate runs
// here, before any weight is read), load every model (tokenizer + weights) and start its engine,
// bind, serve; SIGHUP reloads the mTLS certificates and CRL without dropping anything; on
// SIGTERM/SIGINT stop accepting, let in-flight requests finish within the drain timeout (new ones
// get 503), then exit 0.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/pinned_file.h"
#include "server/app.h"
#include "server/listener.h"

namespace sanctum::server {

struct ModelSpec {
  std::string id;  // the name requests use
  std::string dir;
  // Filled by the model's manifest check, emptied by its load, which maps only these files.
  std::shared_ptr<PinnedFiles> verified;
  // A LoRA / DoRA adapter merged into the weights at load (--adapter NAME=DIR), or empty; with an
  // adapter manifest, the files its check pinned, read by the adapter's load alone.
  std::string adapter_dir;
  std::shared_ptr<PinnedFiles> adapter_verified;
};

// "NAME=DIR" or "DIR" (the name is then the directory's last component).
ModelSpec parse_model_spec(const std::string& arg);

// A check that must pass before any socket opens; it throws sanctum::Error to stop start-up. Its
// duration is recorded as sanctum_mlx_startup_seconds{phase=<phase>}.
struct PreBindCheck {
  std::string phase;  // e.g. "manifest_verify"
  std::function<void()> run;
};

// Blocks until shutdown; returns the process exit code.
int run_server(const ServerOptions& options, const std::vector<ModelSpec>& models, const std::vector<PreBindCheck>& checks,
               ListenerSecurity security = {});

}  // namespace sanctum::server
