// sanctum manifest keygen|generate|sign|verify|pubkey: signed SHA-256 weight manifests.
#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.h"
#include "cli/args.h"
#include "cli/command.h"
#include "security/ed25519.h"
#include "security/gate.h"
#include "security/manifest.h"
#include "security/secure_io.h"
#include "security/sha256.h"

namespace {

using namespace sanctum;
using namespace sanctum::security;

const char* kUsage =
    "usage:\n"
    "  sanctum manifest keygen --out KEY [--force]\n"
    "      new Ed25519 pair: 32-byte seed to KEY (0600), 32-byte public key to KEY.pub\n"
    "  sanctum manifest generate DIR [--out FILE] [--threads N]\n"
    "      sha256sum-format manifest of every file loading DIR would read (stdout without --out)\n"
    "  sanctum manifest sign --key KEY MANIFEST [--out SIG]\n"
    "      detached 64-byte Ed25519 signature over the manifest bytes (default MANIFEST.sig)\n"
    "  sanctum manifest verify [--pubkey PUB [--sig SIG]] MANIFEST [--model DIR] [--threads N]\n"
    "      signature first (SIG defaults to MANIFEST.sig), then the hashes of DIR's files\n"
    "  sanctum manifest pubkey --key KEY\n"
    "      print the public key a seed derives, and check it against KEY.pub\n";

std::string one_positional(const cli::Args& a, const char* what) {
  check(a.positionals().size() == 2, ErrorKind::invalid_argument,
        std::string("expected exactly one ") + what + " (see sanctum manifest --help)");
  return a.positionals()[1];
}

std::string require(const cli::Args& a, const char* flag) {
  auto v = a.get(flag);
  check(v.has_value() && !v->empty(), ErrorKind::invalid_argument, std::string("--") + flag + " is required (see sanctum manifest --help)");
  return *v;
}

int threads_flag(const cli::Args& a) {
  long long t = a.get_int("threads", 0);
  check(t >= 0 && t <= 4096, ErrorKind::invalid_argument, "--threads must be between 0 (all cores) and 4096");
  return static_cast<int>(t);
}

std::string hex(const Ed25519PublicKey& k) { return to_hex(k.data(), k.size()); }

// Derives the public key from the seed and, when KEY.pub exists, insists it matches: a seed that
// derives a different public key than the one deployed is a different signer.
Ed25519PublicKey checked_public_key(const std::string& key_path, const Ed25519Seed& seed) {
  Ed25519PublicKey derived = ed25519_public_from_seed(seed);
  const std::string pub_path = key_path + ".pub";
  if (path_exists(pub_path)) {
    Ed25519PublicKey stored = load_public_key(pub_path);
    check(stored == derived, ErrorKind::invalid_input,
          key_path + " derives public key " + ed25519_fingerprint(derived) + " but " + pub_path + " holds " + ed25519_fingerprint(stored) +
              ": this seed is not the pair's private key. Find the right seed, or rotate: keygen a new pair and re-sign every manifest");
  }
  return derived;
}

int keygen(int argc, char** argv) {
  cli::Args a(argc, argv, {"out"}, {"force"});
  check(a.positionals().size() == 1, ErrorKind::invalid_argument, "keygen takes no positional arguments");
  const std::string out = require(a, "out");
  Ed25519KeyPair pair = ed25519_generate();
  write_key_pair(out, pair, a.has("force"));
  std::printf("private key (seed, 0600): %s\npublic key: %s.pub\nfingerprint: %s\npublic key hex: %s\n", out.c_str(), out.c_str(),
              ed25519_fingerprint(pair.public_key).c_str(), hex(pair.public_key).c_str());
  return 0;
}

int generate(int argc, char** argv) {
  cli::Args a(argc, argv, {"out", "threads"}, {});
  const std::string dir = one_positional(a, "model directory");
  GeneratedManifest m = generate_manifest(dir, threads_flag(a));
  if (auto out = a.get("out")) {
    write_file(*out, m.text, 0644, WriteMode::replace);
    std::fprintf(stderr, "wrote %s: %zu files, %.3f GB hashed in %.2f s (%.2f GB/s, %d threads)\n", out->c_str(), m.files, m.bytes / 1e9,
                 m.seconds, m.seconds > 0 ? m.bytes / m.seconds / 1e9 : 0.0, m.threads);
  } else {
    std::fwrite(m.text.data(), 1, m.text.size(), stdout);
  }
  return 0;
}

int sign(int argc, char** argv) {
  cli::Args a(argc, argv, {"key", "out"}, {});
  const std::string manifest = one_positional(a, "manifest");
  const std::string key_path = require(a, "key");
  const std::string sig_path = a.get_or("out", manifest + ".sig");
  Ed25519Seed seed = load_private_key(key_path);
  Ed25519PublicKey pub = checked_public_key(key_path, seed);
  const std::string bytes = read_all(manifest);
  parse_manifest(bytes, manifest);  // signing one that would not parse only defers the failure to start-up
  Ed25519Signature sig = ed25519_sign(seed, bytes);
  check(ed25519_verify(pub, bytes, sig), ErrorKind::internal, "the signature just made does not verify");
  write_file(sig_path, std::string(sig.begin(), sig.end()), 0644, WriteMode::replace);
  std::printf("signed %s -> %s (%s)\n", manifest.c_str(), sig_path.c_str(), ed25519_fingerprint(pub).c_str());
  return 0;
}

int verify(int argc, char** argv) {
  cli::Args a(argc, argv, {"pubkey", "sig", "model", "threads"}, {});
  const std::string manifest = one_positional(a, "manifest");
  auto pub = a.get("pubkey");
  auto sig = a.get("sig");
  auto model = a.get("model");
  check(pub || model, ErrorKind::invalid_argument, "nothing to verify: pass --pubkey (signature) and/or --model DIR (hashes)");
  if (!model) {
    check(!sig || pub, ErrorKind::invalid_argument, "--sig needs --pubkey to check it against");
    std::string fp;
    read_signed_manifest(manifest, sig, *pub, &fp);
    std::printf("signature OK: %s signed by %s\n", manifest.c_str(), fp.c_str());
    return 0;
  }
  VerifyReport r = verify_model_against_manifest(*model, manifest, sig, pub, threads_flag(a));
  if (r.signature_checked) std::printf("signature OK: %s signed by %s\n", manifest.c_str(), r.key_fingerprint.c_str());
  else std::printf("signature NOT checked (no --pubkey): hashes only\n");
  std::printf("hashes OK: %zu files, %.3f GB in %.2f s (%.2f GB/s, %d threads); total %.2f s\n", r.files, r.bytes / 1e9, r.hash_seconds,
              r.gb_per_s(), r.threads, r.total_seconds);
  return 0;
}

int pubkey(int argc, char** argv) {
  cli::Args a(argc, argv, {"key"}, {});
  check(a.positionals().size() == 1, ErrorKind::invalid_argument, "pubkey takes no positional arguments");
  const std::string key_path = require(a, "key");
  Ed25519PublicKey pub = checked_public_key(key_path, load_private_key(key_path));
  std::printf("fingerprint: %s\npublic key hex: %s\n", ed25519_fingerprint(pub).c_str(), hex(pub).c_str());
  return 0;
}

int run_manifest(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string action = argv[1];
  if (action == "keygen") return keygen(argc, argv);
  if (action == "generate") return generate(argc, argv);
  if (action == "sign") return sign(argc, argv);
  if (action == "verify") return verify(argc, argv);
  if (action == "pubkey") return pubkey(argc, argv);
  fail(ErrorKind::invalid_argument, "unknown manifest action '" + action + "' (keygen, generate, sign, verify, pubkey)");
}

cli::SubcommandRegistration reg("manifest", "keygen|generate|sign|verify signed SHA-256 weight manifests", run_manifest);

}  // namespace
