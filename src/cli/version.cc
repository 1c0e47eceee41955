// sanctum version (also `sanctum --version`): the release, the commit and the CUDA backend.
#include <cstdio>
#include <string>

#include "base/version.h"
#include "cli/args.h"
#include "cli/command.h"
#include "tensor/device_memory.h"

namespace sanctum::cli {
namespace {

const char* kUsage =
    "usage: sanctum version   (or sanctum --version)\n"
    "Prints \"sanctum VERSION (COMMIT)\", then whether the CUDA backend is built in and, if it is,\n"
    "whether a GPU is usable here. COMMIT ends in +dirty when tracked files had changes at build time\n"
    "and is \"unknown\" for a build without git.\n";

int run_version(int argc, char** argv) {
  Args args(argc, argv, {}, {"help"});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::string cuda = "cuda: off (built without the CUDA backend)";
  if (build::cuda_built()) {
    cuda = device_memory::cuda_available() ? "cuda: on (GPU available)"
                                           : "cuda: on (no usable GPU: " + device_memory::cuda_unavailable_reason() + ")";
  }
  std::printf("%s\n%s\n", build::describe().c_str(), cuda.c_str());
  return 0;
}

SubcommandRegistration reg("version", "print the version, the commit and whether the CUDA backend is built in", run_version);

}  // namespace
}  // namespace sanctum::cli
