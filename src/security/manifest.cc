#include "security/manifest.h"

#include <unordered_map>

#include "base/error.h"

namespace sanctum::security {
namespace {

constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX on Linux

[[noreturn]] void line_error(const std::string& source, int line, const std::string& what) {
  fail(ErrorKind::invalid_input, source + " line " + std::to_string(line) + ": " + what);
}

// Quotes a path for an error message, escaping control bytes so a hostile name cannot forge output.
std::string quoted(std::string_view s) {
  std::string out = "'";
  for (unsigned char c : s.substr(0, 200)) {
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 200) out += "...";
  return out + "'";
}

}  // namespace

std::string normalize_relative_path(std::string_view path, std::string* why) {
  auto reject = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return std::string();
  };
  if (path.empty()) return reject("empty path");
  if (path.size() > kMaxPathBytes) return reject("path longer than " + std::to_string(kMaxPathBytes) + " bytes");
  if (path.front() == '/') return reject("absolute path " + quoted(path) + " (paths are relative to the model directory)");
  if (path.find('\0') != std::string_view::npos) return reject("path contains a NUL byte");
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(start, slash - start);
    if (part.empty()) return reject("path " + quoted(path) + " has an empty component ('//' or a trailing '/')");
    if (part == "..") return reject("path " + quoted(path) + " leaves the model directory ('..' component)");
    if (part != ".") {
      if (!out.empty()) out += '/';
      out += part;
    }
    start = slash + 1;
  }
  if (out.empty()) return reject("path " + quoted(path) + " names the model directory itself, not a file");
  return out;
}

Manifest parse_manifest(std::string_view text, const std::string& source) {
  Manifest m;
  std::unordered_map<std::string, int> first_line;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    bool terminated = nl != std::string_view::npos;
    std::string_view line = text.substr(pos, (terminated ? nl : text.size()) - pos);
    pos = terminated ? nl + 1 : text.size();

    if (line.empty()) line_error(source, line_no, "empty line (expected '<64 hex digits>  <path>')");
    if (line.back() == '\r') line_error(source, line_no, "CRLF line ending; convert the manifest to LF line endings");
    if (line.front() == '\\') line_error(source, line_no, "escaped file name (a path with a backslash or newline); rename the file");
    if (line.rfind("SHA256 (", 0) == 0)
      line_error(source, line_no, "BSD-style line ('SHA256 (file) = hash'); regenerate with `sha256sum` or `sanctum manifest generate`");
    if (line.size() < 67) line_error(source, line_no, "line too short (expected '<64 hex digits>  <path>')");

    std::string_view hex = line.substr(0, 64);
    auto digest = digest_from_hex(hex);
    if (!digest) line_error(source, line_no, "the first 64 characters are not a hex SHA-256 digest");
    if (line[64] != ' ') line_error(source, line_no, "expected two spaces (or space and '*') after the digest");
    if (line[65] != ' ' && line[65] != '*') line_error(source, line_no, "expected two spaces (or space and '*') after the digest");

    std::string why;
    std::string path = normalize_relative_path(line.substr(66), &why);
    if (path.empty()) line_error(source, line_no, why);
    auto [it, inserted] = first_line.emplace(path, line_no);
    if (!inserted)
      line_error(source, line_no, "duplicate entry for " + quoted(path) + " (first listed on line " + std::to_string(it->second) + ")");
    m.entries.push_back({*digest, std::move(path), line_no});
  }
  if (m.entries.empty()) fail(ErrorKind::invalid_input, source + ": manifest lists no files");
  return m;
}

std::string format_manifest(const std::vector<ManifestEntry>& entries) {
  std::string out;
  for (const auto& e : entries) {
    out += to_hex(e.digest);
    out += "  ";
    out += e.path;
    out += '\n';
  }
  return out;
}

}  // namespace sanctum::security
