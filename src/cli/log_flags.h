#pragma once
// --log-format text|json and --log-level debug|info|warn|error, shared by the long-running
// subcommands (serve, route).
#include "cli/args.h"

namespace sanctum::cli {

// Applies both flags (text and info when absent); throws Error(invalid_argument) naming the choices.
void apply_log_flags(const Args& args);

}  // namespace sanctum::cli
