#pragma once
// Small flag parser shared by subcommands: --name value, --name=value, boolean --flag, positionals.
// Unknown flags are an error that names the flag.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sanctum::cli {

class Args {
 public:
  // value_flags take a value; bool_flags do not. Repeatable value flags keep every occurrence.
  Args(int argc, char** argv, std::vector<std::string> value_flags, std::vector<std::string> bool_flags);

  bool has(const std::string& flag) const;
  std::optional<std::string> get(const std::string& flag) const;  // last occurrence
  std::vector<std::string> get_all(const std::string& flag) const;
  std::string get_or(const std::string& flag, const std::string& fallback) const;
  long long get_int(const std::string& flag, long long fallback) const;
  double get_double(const std::string& flag, double fallback) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
};

}  // namespace sanctum::cli
