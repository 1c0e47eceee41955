#pragma once
// Subcommand registry: each src/cli/<name>.cc registers itself with a static SubcommandRegistration,
// so adding a subcommand touches only its own file.
#include <functional>
#include <string>
#include <vector>

namespace sanctum::cli {

struct Subcommand {
  std::string name;
  std::string summary;
  std::function<int(int argc, char** argv)> run;  // argv[0] is the subcommand name
};

std::vector<Subcommand>& subcommands();

struct SubcommandRegistration {
  SubcommandRegistration(std::string name, std::string summary, std::function<int(int, char**)> run) {
    subcommands().push_back({std::move(name), std::move(summary), std::move(run)});
  }
};

}  // namespace sanctum::cli
