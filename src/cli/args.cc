#include "cli/args.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "base/error.h"

namespace sanctum::cli {

Args::Args(int argc, char** argv, std::vector<std::string> value_flags, std::vector<std::string> bool_flags) {
  auto is_in = [](const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      positionals_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_inline = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline = true;
    }
    if (is_in(bool_flags, name)) {
      check(!has_inline, ErrorKind::invalid_argument, "--" + name + " takes no value");
      values_[name].push_back("1");
    } else if (is_in(value_flags, name)) {
      if (!has_inline) {
        check(i + 1 < argc, ErrorKind::invalid_argument, "--" + name + " needs a value");
        value = argv[++i];
      }
      values_[name].push_back(value);
    } else {
      fail(ErrorKind::invalid_argument, "unknown flag --" + name + " (see --help)");
    }
  }
}

bool Args::has(const std::string& flag) const { return values_.count(flag) != 0; }

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::get_all(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string Args::get_or(const std::string& flag, const std::string& fallback) const { return get(flag).value_or(fallback); }

long long Args::get_int(const std::string& flag, long long fallback) const {
  auto v = get(flag);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  check(errno == 0 && end && *end == '\0' && !v->empty(), ErrorKind::invalid_argument,
        "--" + flag + " expects an integer, got '" + *v + "'");
  return x;
}

double Args::get_double(const std::string& flag, double fallback) const {
  auto v = get(flag);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  check(errno == 0 && end && *end == '\0' && !v->empty(), ErrorKind::invalid_argument, "--" + flag + " expects a number, got '" + *v + "'");
  return x;
}

}  // namespace sanctum::cli
