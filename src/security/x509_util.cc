#include "security/x509_util.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "base/error.h"
#include "security/secure_io.h"

namespace sanctum::security::x509 {
namespace {

std::unique_ptr<BIO, Free> mem_bio() {
  std::unique_ptr<BIO, Free> b(BIO_new(BIO_s_mem()));
  openssl_check(b != nullptr, "BIO allocation");
  return b;
}

std::string bio_text(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return std::string(data, static_cast<size_t>(n));
}

std::unique_ptr<BIO, Free> bio_over(const std::string& text) {
  std::unique_ptr<BIO, Free> b(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  openssl_check(b != nullptr, "BIO allocation");
  return b;
}

}  // namespace

void openssl_check(bool ok, const std::string& what) {
  if (ok) return;
  std::string detail;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    detail += detail.empty() ? "" : "; ";
    detail += buf;
  }
  fail(ErrorKind::internal, "OpenSSL: " + what + " failed" + (detail.empty() ? "" : ": " + detail));
}

Key generate_p256_key() {
  Key k(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  openssl_check(k != nullptr, "EC P-256 key generation");
  return k;
}

std::string key_to_pem(EVP_PKEY* key) {
  auto b = mem_bio();
  openssl_check(PEM_write_bio_PrivateKey(b.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1, "writing a PEM private key");
  return bio_text(b.get());
}

std::string cert_to_pem(X509* cert) {
  auto b = mem_bio();
  openssl_check(PEM_write_bio_X509(b.get(), cert) == 1, "writing a PEM certificate");
  return bio_text(b.get());
}

std::string crl_to_pem(X509_CRL* crl) {
  auto b = mem_bio();
  openssl_check(PEM_write_bio_X509_CRL(b.get(), crl) == 1, "writing a PEM CRL");
  return bio_text(b.get());
}

Key load_key(const std::string& path) {
  std::string pem = read_private(path);
  auto b = bio_over(pem);
  Key k(PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr));
  OPENSSL_cleanse(pem.data(), pem.size());
  ERR_clear_error();
  check(k != nullptr, ErrorKind::invalid_input, path + ": not a PEM private key");
  return k;
}

Cert load_cert(const std::string& path) {
  const std::string pem = read_all(path);  // the BIO reads this buffer in place
  auto b = bio_over(pem);
  Cert c(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  check(c != nullptr, ErrorKind::invalid_input, path + ": not a PEM certificate");
  return c;
}

Crl load_crl(const std::string& path) {
  const std::string pem = read_all(path);
  auto b = bio_over(pem);
  Crl c(PEM_read_bio_X509_CRL(b.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  check(c != nullptr, ErrorKind::invalid_input, path + ": not a PEM CRL");
  return c;
}

Integer random_serial() {
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(BN_new(), &BN_free);
  openssl_check(bn && BN_rand(bn.get(), 159, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY) == 1, "random serial");
  Integer serial(BN_to_ASN1_INTEGER(bn.get(), nullptr));
  openssl_check(serial != nullptr, "serial conversion");
  return serial;
}

std::string serial_hex(const ASN1_INTEGER* serial) {
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(ASN1_INTEGER_to_BN(serial, nullptr), &BN_free);
  openssl_check(bn != nullptr, "serial conversion");
  std::unique_ptr<char, void (*)(char*)> hex(BN_bn2hex(bn.get()), [](char* p) { OPENSSL_free(p); });
  openssl_check(hex != nullptr, "serial conversion");
  return hex.get();
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Extension ext(X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value));
  openssl_check(ext != nullptr, std::string("building extension ") + OBJ_nid2sn(nid) + "=" + value);
  openssl_check(X509_add_ext(cert, ext.get(), -1) == 1, std::string("adding extension ") + OBJ_nid2sn(nid));
}

Name make_name(const std::string& cn) {
  Name n(X509_NAME_new());
  openssl_check(n != nullptr, "X509_NAME allocation");
  auto add = [&](const char* field, const std::string& v) {
    openssl_check(X509_NAME_add_entry_by_txt(n.get(), field, MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(v.c_str()),
                                             static_cast<int>(v.size()), -1, 0) == 1,
                  std::string("setting ") + field);
  };
  add("O", "sanctum");
  add("CN", cn);
  return n;
}

std::string common_name(X509* cert) {
  X509_NAME* subject = X509_get_subject_name(cert);
  int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (i < 0) return "";
  ASN1_STRING* s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
  unsigned char* utf8 = nullptr;
  int n = ASN1_STRING_to_UTF8(&utf8, s);
  if (n < 0) return "";
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

}  // namespace sanctum::security::x509
