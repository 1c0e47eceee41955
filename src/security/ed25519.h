#pragma once
// Ed25519 keys and detached signatures over manifest bytes, through OpenSSL EVP.
// On disk: the private key is the raw 32-byte seed (mode 0600); the public key is the raw 32 bytes.
// PEM (PKCS#8 private, SubjectPublicKeyInfo public, as `openssl genpkey -algorithm ed25519` writes)
// is accepted on read too.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace sanctum::security {

using Ed25519Seed = std::array<uint8_t, 32>;
using Ed25519PublicKey = std::array<uint8_t, 32>;
using Ed25519Signature = std::array<uint8_t, 64>;

struct Ed25519KeyPair {
  Ed25519Seed seed{};
  Ed25519PublicKey public_key{};
};

// A fresh key pair from the OpenSSL CSPRNG.
Ed25519KeyPair ed25519_generate();
// The public key a seed derives (the check that would have caught "the signer in the vault is a
// different key").
Ed25519PublicKey ed25519_public_from_seed(const Ed25519Seed& seed);

Ed25519Signature ed25519_sign(const Ed25519Seed& seed, std::string_view message);
bool ed25519_verify(const Ed25519PublicKey& key, std::string_view message, const Ed25519Signature& sig);

// File loaders; each throws Error naming the file. load_private_key refuses a key file that group
// or others can access (see secure_io.h).
Ed25519Seed load_private_key(const std::string& path);
Ed25519PublicKey load_public_key(const std::string& path);
Ed25519Signature load_signature(const std::string& path);

// Writes KEY (0600, exclusive unless force) and KEY.pub (0644).
void write_key_pair(const std::string& key_path, const Ed25519KeyPair& pair, bool force);

// Short fingerprint for logs: "ed25519:" + first 16 hex digits of SHA-256(public key).
std::string ed25519_fingerprint(const Ed25519PublicKey& key);

}  // namespace sanctum::security
