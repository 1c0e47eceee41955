#include "security/ed25519.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>

#include "base/error.h"
#include "security/secure_io.h"
#include "security/sha256.h"

namespace sanctum::security {
namespace {

struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

Pkey private_pkey(const Ed25519Seed& seed) {
  Pkey k(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size()));
  check(k != nullptr, ErrorKind::internal, "OpenSSL: cannot build Ed25519 private key");
  return k;
}

Pkey public_pkey(const Ed25519PublicKey& key) {
  Pkey k(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, key.data(), key.size()));
  check(k != nullptr, ErrorKind::invalid_input, "not a valid Ed25519 public key");
  return k;
}

bool looks_like_pem(const std::string& bytes) { return bytes.rfind("-----BEGIN ", 0) == 0; }

// Reads a PEM key with `reader`, checks it is Ed25519 and extracts its 32 raw bytes with `raw`.
template <class Reader, class Raw>
std::array<uint8_t, 32> raw_from_pem(const std::string& path, const std::string& pem, Reader reader, Raw raw, const char* what) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  check(bio != nullptr, ErrorKind::internal, "OpenSSL: BIO allocation failed");
  Pkey k(reader(bio.get()));
  check(k != nullptr, ErrorKind::invalid_input, path + ": not a PEM " + what);
  check(EVP_PKEY_get_id(k.get()) == EVP_PKEY_ED25519, ErrorKind::invalid_input, path + ": PEM " + what + " is not Ed25519");
  std::array<uint8_t, 32> out{};
  size_t n = out.size();
  check(raw(k.get(), out.data(), &n) == 1 && n == out.size(), ErrorKind::invalid_input, path + ": cannot extract the Ed25519 " + what);
  return out;
}

template <size_t N>
std::array<uint8_t, N> exact_bytes(const std::string& path, const std::string& bytes, const char* what) {
  check(bytes.size() == N, ErrorKind::invalid_input,
        path + ": expected a " + what + " of exactly " + std::to_string(N) + " raw bytes, found " + std::to_string(bytes.size()) +
            " bytes");
  std::array<uint8_t, N> out{};
  std::copy(bytes.begin(), bytes.end(), out.begin());
  return out;
}

}  // namespace

Ed25519KeyPair ed25519_generate() {
  EVP_PKEY* raw = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  check(raw != nullptr, ErrorKind::internal, "OpenSSL: Ed25519 key generation failed");
  Pkey k(raw);
  Ed25519KeyPair pair;
  size_t n = pair.seed.size();
  check(EVP_PKEY_get_raw_private_key(k.get(), pair.seed.data(), &n) == 1 && n == 32, ErrorKind::internal,
        "OpenSSL: cannot read Ed25519 seed");
  n = pair.public_key.size();
  check(EVP_PKEY_get_raw_public_key(k.get(), pair.public_key.data(), &n) == 1 && n == 32, ErrorKind::internal,
        "OpenSSL: cannot read Ed25519 public key");
  return pair;
}

Ed25519PublicKey ed25519_public_from_seed(const Ed25519Seed& seed) {
  Pkey k = private_pkey(seed);
  Ed25519PublicKey pub{};
  size_t n = pub.size();
  check(EVP_PKEY_get_raw_public_key(k.get(), pub.data(), &n) == 1 && n == 32, ErrorKind::internal,
        "OpenSSL: cannot derive Ed25519 public key");
  return pub;
}

Ed25519Signature ed25519_sign(const Ed25519Seed& seed, std::string_view message) {
  Pkey k = private_pkey(seed);
  MdCtx ctx(EVP_MD_CTX_new());
  check(ctx && EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, k.get()) == 1, ErrorKind::internal,
        "OpenSSL: Ed25519 sign init failed");
  Ed25519Signature sig{};
  size_t n = sig.size();
  check(EVP_DigestSign(ctx.get(), sig.data(), &n, reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1 &&
            n == sig.size(),
        ErrorKind::internal, "OpenSSL: Ed25519 signing failed");
  return sig;
}

bool ed25519_verify(const Ed25519PublicKey& key, std::string_view message, const Ed25519Signature& sig) {
  Pkey k = public_pkey(key);
  MdCtx ctx(EVP_MD_CTX_new());
  check(ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, k.get()) == 1, ErrorKind::internal,
        "OpenSSL: Ed25519 verify init failed");
  return EVP_DigestVerify(ctx.get(), sig.data(), sig.size(), reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
}

Ed25519Seed load_private_key(const std::string& path) {
  std::string bytes = read_private(path);
  struct Wipe {
    std::string& s;
    ~Wipe() { OPENSSL_cleanse(s.data(), s.size()); }
  } wipe{bytes};
  if (looks_like_pem(bytes))
    return raw_from_pem(
        path, bytes, [](BIO* b) { return PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr); }, EVP_PKEY_get_raw_private_key,
        "private key");
  return exact_bytes<32>(path, bytes, "Ed25519 private key (seed)");
}

Ed25519PublicKey load_public_key(const std::string& path) {
  std::string bytes = read_all(path);
  if (looks_like_pem(bytes))
    return raw_from_pem(
        path, bytes, [](BIO* b) { return PEM_read_bio_PUBKEY(b, nullptr, nullptr, nullptr); }, EVP_PKEY_get_raw_public_key, "public key");
  return exact_bytes<32>(path, bytes, "Ed25519 public key");
}

Ed25519Signature load_signature(const std::string& path) { return exact_bytes<64>(path, read_all(path), "detached Ed25519 signature"); }

void write_key_pair(const std::string& key_path, const Ed25519KeyPair& pair, bool force) {
  const std::string pub_path = key_path + ".pub";
  if (!force) {
    // Check both before writing either, so a refusal leaves nothing half-made.
    for (const auto& p : {key_path, pub_path})
      check(!path_exists(p), ErrorKind::invalid_argument, p + ": already exists; refusing to overwrite a key (pass --force to replace it)");
  }
  const WriteMode how = force ? WriteMode::replace : WriteMode::exclusive;
  write_file(key_path, std::string(pair.seed.begin(), pair.seed.end()), 0600, how);
  write_file(pub_path, std::string(pair.public_key.begin(), pair.public_key.end()), 0644, how);
}

std::string ed25519_fingerprint(const Ed25519PublicKey& key) {
  auto d = sha256(std::string_view(reinterpret_cast<const char*>(key.data()), key.size()));
  return "ed25519:" + to_hex(d.data(), 8);
}

}  // namespace sanctum::security
