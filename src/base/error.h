#pragma once
// Typed errors. Load-time and request-time problems throw sanctum::Error; the CLI turns one into a
// single line and a non-zero exit, the server into an OpenAI error object.
#include <stdexcept>
#include <string>
#include <utility>

namespace sanctum {

enum class ErrorKind {
  invalid_argument,  // bad flag, bad request parameter
  invalid_input,     // malformed data: JSON, UTF-8, file contents
  not_found,         // missing file, tensor, model, key
  unsupported,       // a dtype / model_type / format we do not handle
  io,                // read/write/mmap failures
  internal,          // a bug: an invariant broke
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void fail(ErrorKind kind, std::string message) { throw Error(kind, std::move(message)); }

// check(cond, kind, msg): throws when cond is false. Used for argument and data validation, not for
// hot loops.
inline void check(bool condition, ErrorKind kind, const std::string& message) {
  if (!condition) throw Error(kind, message);
}

// The same with the message built only on failure, for checks on paths that run per op (tensor views).
#define SANCTUM_CHECK(condition, kind, message)           \
  do {                                                    \
    if (!(condition)) ::sanctum::fail((kind), (message)); \
  } while (0)

}  // namespace sanctum
