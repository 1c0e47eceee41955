#pragma once
// RAII handles and small helpers over OpenSSL's X509 API, shared by the PKI (pki.cc, crl.cc).
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

namespace sanctum::security::x509 {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(X509_CRL* p) const { X509_CRL_free(p); }
  void operator()(X509_NAME* p) const { X509_NAME_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(ASN1_STRING* p) const { ASN1_STRING_free(p); }  // ASN1_INTEGER and ASN1_TIME
  void operator()(BIO* p) const { BIO_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Crl = std::unique_ptr<X509_CRL, Free>;
using Name = std::unique_ptr<X509_NAME, Free>;
using Extension = std::unique_ptr<X509_EXTENSION, Free>;
using Integer = std::unique_ptr<ASN1_INTEGER, Free>;
using Time = std::unique_ptr<ASN1_TIME, Free>;

// Throws Error(kind internal) with `what` and OpenSSL's queued error text, when ok is false.
void openssl_check(bool ok, const std::string& what);

Key generate_p256_key();

// PEM text: PKCS#8 (unencrypted) for keys, X.509 for certificates and CRLs.
std::string key_to_pem(EVP_PKEY* key);
std::string cert_to_pem(X509* cert);
std::string crl_to_pem(X509_CRL* crl);

// Loaders throw Error naming the path. load_key refuses a key file others can read.
Key load_key(const std::string& path);
Cert load_cert(const std::string& path);
Crl load_crl(const std::string& path);

// A random positive 159-bit serial (RFC 5280: at most 20 octets, unpredictable).
Integer random_serial();
std::string serial_hex(const ASN1_INTEGER* serial);

// Adds an extension given in OpenSSL config syntax (only for fixed, trusted value strings).
void add_ext(X509* cert, X509* issuer, int nid, const char* value);

// "CN=<cn>, O=sanctum" as an X509_NAME.
Name make_name(const std::string& common_name);
// The subject's CN, or "" if none.
std::string common_name(X509* cert);

}  // namespace sanctum::security::x509
