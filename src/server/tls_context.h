#pragma once
// The mTLS listener's configuration: server certificate chain and key, the CA whose client
// certificates are accepted (a client certificate is required), and optionally a CRL. TLS 1.2 is
// the floor (AEAD ECDHE suites only), 1.3 is negotiated whenever the client has it. Sessions are
// never resumed (no tickets, no cache), so every connection presents and verifies its certificate
// against the CRL in force at that moment.
//
// reload() rebuilds the whole context from the same paths (SIGHUP): new connections use the new
// one, connections already open keep theirs; a reload that fails leaves the old context serving.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/ssl/context.hpp>

namespace sanctum::server {

struct TlsFiles {
  std::string cert;       // PEM chain: the server certificate first
  std::string key;        // PEM private key; must be private (0600)
  std::string client_ca;  // PEM CA certificate(s) that issue client certificates
  std::string crl;        // PEM CRL(s) of that CA; empty: no revocation checking
};

class TlsContext {
 public:
  // Builds the context at once; throws sanctum::Error naming the flag and file that is wrong.
  explicit TlsContext(TlsFiles files);

  // The context new connections should use; it stays valid for as long as the caller holds it.
  std::shared_ptr<boost::asio::ssl::context> current() const;
  // Rebuilds from the files; throws (keeping the old context) when any of them is now wrong.
  void reload();
  // Counts successful reloads; connections opened under an older generation re-check their peer.
  uint64_t generation() const { return generation_.load(); }
  const TlsFiles& files() const { return files_; }

 private:
  TlsFiles files_;
  mutable std::mutex mutex_;
  std::shared_ptr<boost::asio::ssl::context> ctx_;
  std::atomic<uint64_t> generation_{0};
};

// Builds one context from the files (what the constructor and reload() use).
std::shared_ptr<boost::asio::ssl::context> build_tls_context(const TlsFiles& files);

}  // namespace sanctum::server
