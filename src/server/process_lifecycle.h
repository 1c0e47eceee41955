#pragma once
// The process lifecycle that `sanctum serve` and `sanctum route` share: signals handled on the main
// thread (SIGHUP reloads TLS, SIGTERM/SIGINT stop), the "listening" log line's address lists, and
// the bounded wait for in-flight requests during a graceful stop.
#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "server/tls_context.h"

namespace sanctum::server {

// Blocks SIGTERM, SIGINT and SIGHUP in every thread started after this call (they are taken with
// wait_for_stop_signal instead) and ignores SIGPIPE. Returns the blocked set.
sigset_t block_process_signals();

// Waits for SIGTERM or SIGINT and returns it. A SIGHUP meanwhile reloads tls's certificates and CRL
// (logged; a failed reload keeps the previous ones), or is logged as a no-op without TLS, and then
// runs on_hup when given (the adapter list's re-read).
int wait_for_stop_signal(const sigset_t& signals, TlsContext* tls, const std::function<void()>& on_hup = {});

// "a,b,c", or "-" for none: listener endpoints for log lines.
std::string join_addresses(const std::vector<std::string>& addresses);

// Polls in_flight() every 10 ms until it is 0 or timeout_s has passed; returns what is left.
int wait_for_drain(const std::function<int()>& in_flight, double timeout_s);

}  // namespace sanctum::server
