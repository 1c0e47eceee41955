#include "server/process_lifecycle.h"

#include <pthread.h>

#include <chrono>
#include <thread>

#include "base/log.h"

namespace sanctum::server {

sigset_t block_process_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return signals;
}

int wait_for_stop_signal(const sigset_t& signals, TlsContext* tls, const std::function<void()>& on_hup) {
  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) return sig;
    if (on_hup) on_hup();
    if (!tls) {
      log::info("SIGHUP: no TLS listener, nothing to reload");
      continue;
    }
    try {
      tls->reload();
      log::info("SIGHUP: TLS certificates and CRL reloaded", {{"generation", std::to_string(tls->generation())}});
    } catch (const std::exception& e) {
      log::error("SIGHUP: reload failed, the previous certificates stay in use", {{"error", e.what()}});
    }
  }
}

std::string join_addresses(const std::vector<std::string>& addresses) {
  std::string out;
  for (const std::string& a : addresses) out += (out.empty() ? "" : ",") + a;
  return out.empty() ? std::string("-") : out;
}

int wait_for_drain(const std::function<int()>& in_flight, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
  while (in_flight() > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return in_flight();
}

}  // namespace sanctum::server
