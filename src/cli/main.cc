// sanctum: one binary, many subcommands (src/cli/<name>.cc each registers one).
#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/tuning.h"
#include "cli/command.h"

namespace sanctum::cli {
std::vector<Subcommand>& subcommands() {
  static std::vector<Subcommand> registry;
  return registry;
}
}  // namespace sanctum::cli

namespace {
void print_usage() {
  std::fprintf(stderr, "usage: sanctum <command> [flags]\n\ncommands:\n");
  for (const auto& c : sanctum::cli::subcommands()) std::fprintf(stderr, "  %-12s %s\n", c.name.c_str(), c.summary.c_str());
  std::fprintf(stderr, "\nsanctum --help-tuning [--markdown] lists the tuning knobs (--tune KEY=VALUE,...).\n");
}
}  // namespace

int main(int argc, char** argv) {
  // Buffers of 128 KiB and more (KV storage, activations, per-call scratch) are mapped and unmapped on
  // their own. glibc's default raises that threshold after the first such free, after which they
  // come from the heap, whose holes stay resident: on the 0.5B CPU benchmark that held 5-12 MB more
  // at the peak, varying with unrelated changes in allocation order (bench/RESULTS.md).
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--help-tuning")) {
    const bool markdown = argc > 2 && !std::strcmp(argv[2], "--markdown");
    if (argc > 2 + (markdown ? 1 : 0)) {
      std::fprintf(stderr, "usage: sanctum --help-tuning [--markdown]\n");
      return 2;
    }
    std::fputs((markdown ? sanctum::tuning_markdown() : sanctum::tuning_help_text()).c_str(), stdout);
    return 0;
  }
  // `sanctum --version` is `sanctum version`.
  const std::string name = !std::strcmp(argv[1], "--version") ? "version" : argv[1];
  for (const auto& c : sanctum::cli::subcommands()) {
    if (c.name != name) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const sanctum::Error& e) {
      std::fprintf(stderr, "sanctum %s: error: %s\n", name.c_str(), e.what());
      return e.kind() == sanctum::ErrorKind::invalid_argument ? 2 : 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sanctum %s: internal error: %s\n", name.c_str(), e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "sanctum: unknown command '%s'\n", name.c_str());
  print_usage();
  return 2;
}
