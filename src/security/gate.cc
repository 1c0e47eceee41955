#include "security/gate.h"

#include <chrono>
#include <set>
#include <vector>

#include "base/error.h"
#include "security/ed25519.h"
#include "security/manifest.h"
#include "security/model_files.h"
#include "security/parallel_hash.h"
#include "security/secure_io.h"

namespace sanctum::security {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Joins up to `limit` problems into one line, saying how many more there were.
[[noreturn]] void fail_with(ErrorKind kind, const std::string& head, const std::vector<std::string>& problems, size_t limit = 5) {
  std::string msg = head;
  for (size_t i = 0; i < problems.size() && i < limit; ++i) msg += (i ? "; " : "") + problems[i];
  if (problems.size() > limit) msg += "; and " + std::to_string(problems.size() - limit) + " more";
  fail(kind, msg);
}

std::string short_hex(const Sha256Digest& d) { return to_hex(d.data(), 8) + "..."; }

}  // namespace

std::string read_signed_manifest(const std::string& manifest_path, const std::optional<std::string>& signature_path,
                                 const std::string& public_key_path, std::string* fingerprint) {
  const std::string sig_path = signature_path.value_or(manifest_path + ".sig");
  Ed25519PublicKey key = load_public_key(public_key_path);
  Ed25519Signature sig = load_signature(sig_path);
  std::string bytes = read_all(manifest_path);
  const std::string fp = ed25519_fingerprint(key);
  if (!ed25519_verify(key, bytes, sig))
    fail(ErrorKind::invalid_input, "signature verification FAILED: " + manifest_path + " (signature " + sig_path +
                                       ") was not signed by this key (" + public_key_path + ", " + fp +
                                       "); the manifest was edited or signed by a different key. Refusing to trust it.");
  if (fingerprint) *fingerprint = fp;
  return bytes;
}

VerifyReport verify_model_against_manifest(const std::string& model_dir, const std::string& manifest_path,
                                           const std::optional<std::string>& signature_path,
                                           const std::optional<std::string>& public_key_path, int threads) {
  const auto t0 = Clock::now();
  VerifyReport report;
  check(!(signature_path && !public_key_path), ErrorKind::invalid_argument,
        "a manifest signature was given without a public key to check it; pass the public key too");

  // 1. Signature over the exact bytes we then parse.
  std::string text;
  if (public_key_path) {
    text = read_signed_manifest(manifest_path, signature_path, *public_key_path, &report.key_fingerprint);
    report.signature_checked = true;
  } else {
    text = read_all(manifest_path);
  }
  Manifest manifest = parse_manifest(text, manifest_path);

  // 2. Every listed path must be a regular file inside the model directory, symlinks resolved.
  const std::string real_dir = canonical_dir(model_dir);
  std::vector<std::string> real_paths;
  std::vector<std::string> problems;
  for (const auto& e : manifest.entries) {
    Resolved r = resolve_inside(real_dir, e.path);
    if (r.status == Resolve::ok) {
      real_paths.push_back(r.real_path);
      continue;
    }
    const char* what = r.status == Resolve::escapes   ? "path escapes the model directory: "
                       : r.status == Resolve::missing ? "missing file: "
                                                      : "not a file: ";
    problems.push_back(what + e.path + " (manifest line " + std::to_string(e.line) + ") " + r.detail);
  }
  if (!problems.empty())
    fail_with(ErrorKind::invalid_input, "model verification FAILED (" + model_dir + " against " + manifest_path + "): ", problems);

  // 3. Nothing the load would read may be missing from the manifest.
  std::set<std::string> listed;
  for (const auto& e : manifest.entries) listed.insert(e.path);
  for (const auto& f : files_a_load_reads(model_dir))
    if (!listed.count(f)) problems.push_back("unlisted file the load would read: " + f);
  if (!problems.empty())
    fail_with(ErrorKind::invalid_input, "model verification FAILED (" + model_dir + " against " + manifest_path + "): ", problems);

  // 4. Hash everything in parallel and compare.
  HashRun run = hash_files_parallel(real_paths, threads);
  for (size_t i = 0; i < manifest.entries.size(); ++i) {
    const auto& e = manifest.entries[i];
    const auto& o = run.outcomes[i];
    if (!o.ok) problems.push_back("cannot hash " + e.path + ": " + o.error);
    else if (o.digest.digest != e.digest)
      problems.push_back("hash mismatch: " + e.path + " (manifest line " + std::to_string(e.line) + " expects " + short_hex(e.digest) +
                         ", file hashes to " + short_hex(o.digest.digest) + ", " + std::to_string(o.digest.bytes) + " bytes)");
  }
  if (!problems.empty())
    fail_with(ErrorKind::invalid_input, "model verification FAILED (" + model_dir + " against " + manifest_path + "): ", problems);

  report.pinned = PinnedFiles(manifest_path);
  for (size_t i = 0; i < manifest.entries.size(); ++i) report.pinned.add(manifest.entries[i].path, run.outcomes[i].file);
  report.files = manifest.entries.size();
  report.bytes = run.bytes;
  report.threads = run.threads;
  report.hash_seconds = run.seconds;
  report.total_seconds = seconds_since(t0);
  return report;
}

GeneratedManifest generate_manifest(const std::string& model_dir, int threads) {
  const std::string real_dir = canonical_dir(model_dir);
  std::vector<std::string> rel = files_a_load_reads(model_dir);
  check(!rel.empty(), ErrorKind::not_found, model_dir + ": no files a load would read (no config.json, tokenizer or *.safetensors)");
  std::vector<std::string> real_paths;
  std::vector<std::string> problems;
  for (const auto& f : rel) {
    if (f.find_first_of("\\\n\r") != std::string::npos) {
      problems.push_back("file name with a backslash or line break cannot be listed: rename it");
      continue;
    }
    Resolved r = resolve_inside(real_dir, f);
    if (r.status == Resolve::ok) real_paths.push_back(r.real_path);
    else problems.push_back(f + " " + r.detail);
  }
  if (!problems.empty()) fail_with(ErrorKind::invalid_input, "cannot generate a manifest for " + model_dir + ": ", problems);

  GeneratedManifest out;
  HashRun run = hash_files_parallel(real_paths, threads);
  std::vector<ManifestEntry> entries;
  for (size_t i = 0; i < rel.size(); ++i) {
    if (!run.outcomes[i].ok) problems.push_back(run.outcomes[i].error);
    entries.push_back({run.outcomes[i].digest.digest, rel[i], 0});
  }
  if (!problems.empty()) fail_with(ErrorKind::io, "cannot generate a manifest for " + model_dir + ": ", problems);
  out.text = format_manifest(entries);
  out.files = entries.size();
  out.bytes = run.bytes;
  out.seconds = run.seconds;
  out.threads = run.threads;
  return out;
}

}  // namespace sanctum::security
