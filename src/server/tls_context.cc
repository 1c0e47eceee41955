#include "server/tls_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "base/error.h"
#include "security/secure_io.h"

namespace sanctum::server {

namespace ssl = boost::asio::ssl;

namespace {

// The most recent OpenSSL error as text (the queue is cleared).
std::string openssl_error() {
  unsigned long code = ERR_get_error();
  unsigned long last = code;
  while ((code = ERR_get_error()) != 0) last = code;
  if (last == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(last, buf, sizeof buf);
  return buf;
}

[[noreturn]] void fail_file(const char* flag, const std::string& path, const std::string& what) {
  ERR_clear_error();
  fail(ErrorKind::invalid_input, std::string(flag) + " " + path + ": " + what);
}

void require_readable(const char* flag, const std::string& path) {
  check(!path.empty(), ErrorKind::invalid_argument, std::string(flag) + " is required for the TLS listener");
  check(security::path_exists(path), ErrorKind::not_found, std::string(flag) + " " + path + ": no such file");
}

void load_key(SSL_CTX* ctx, const std::string& path) {
  // Through secure_io: a key that group or others can read is refused, as for every other secret.
  std::string pem;
  try {
    pem = security::read_private(path);
  } catch (const Error& e) {
    fail(e.kind(), std::string("--tls-key: ") + e.what());
  }
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  check(bio != nullptr, ErrorKind::internal, "BIO_new_mem_buf failed");
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  OPENSSL_cleanse(pem.data(), pem.size());
  if (!key) fail_file("--tls-key", path, "not a PEM private key (" + openssl_error() + ")");
  const int ok = SSL_CTX_use_PrivateKey(ctx, key);
  EVP_PKEY_free(key);
  if (ok != 1) fail_file("--tls-key", path, "cannot use this key (" + openssl_error() + ")");
}

void load_crl(SSL_CTX* ctx, const std::string& path) {
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  X509_LOOKUP* lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file());
  check(lookup != nullptr, ErrorKind::internal, "X509_STORE_add_lookup failed");
  const int n = X509_load_crl_file(lookup, path.c_str(), X509_FILETYPE_PEM);
  if (n <= 0) fail_file("--tls-crl", path, "no PEM CRL could be read (" + openssl_error() + ")");
  // Leaf certificates are checked against the CRL; the CA itself is the trust anchor.
  X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
}

}  // namespace

std::shared_ptr<ssl::context> build_tls_context(const TlsFiles& files) {
  require_readable("--tls-cert", files.cert);
  require_readable("--tls-key", files.key);
  require_readable("--tls-client-ca", files.client_ca);
  if (!files.crl.empty()) require_readable("--tls-crl", files.crl);

  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* ctx = context->native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // TLS 1.2 fallback: forward-secret AEAD suites only. TLS 1.3 suites are OpenSSL's defaults.
  if (SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20") != 1)
    fail(ErrorKind::internal, "cannot set the TLS 1.2 cipher list: " + openssl_error());
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1)
    fail_file("--tls-cert", files.cert, "not a PEM certificate chain (" + openssl_error() + ")");
  load_key(ctx, files.key);
  if (SSL_CTX_check_private_key(ctx) != 1) fail_file("--tls-key", files.key, "does not match the certificate in " + files.cert);

  if (SSL_CTX_load_verify_locations(ctx, files.client_ca.c_str(), nullptr) != 1)
    fail_file("--tls-client-ca", files.client_ca, "not a PEM CA certificate (" + openssl_error() + ")");
  // Tells clients which CA to pick a certificate from.
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca.c_str());
  if (!names) fail_file("--tls-client-ca", files.client_ca, "no CA name could be read (" + openssl_error() + ")");
  SSL_CTX_set_client_CA_list(ctx, names);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_verify_depth(ctx, 4);
  if (!files.crl.empty()) load_crl(ctx, files.crl);
  ERR_clear_error();
  return context;
}

TlsContext::TlsContext(TlsFiles files) : files_(std::move(files)), ctx_(build_tls_context(files_)) {}

std::shared_ptr<ssl::context> TlsContext::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ctx_;
}

void TlsContext::reload() {
  auto fresh = build_tls_context(files_);  // throws before anything changes
  std::lock_guard<std::mutex> lock(mutex_);
  ctx_ = std::move(fresh);
  ++generation_;
}

}  // namespace sanctum::server
