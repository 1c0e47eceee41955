#include "security/pki.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "base/error.h"
#include "security/pki_internal.h"
#include "security/secure_io.h"
#include "security/x509_util.h"

namespace sanctum::security {
namespace {

using namespace x509;

enum class Usage { ca, server, client };

void make_dir(const std::string& dir, mode_t mode) {
  if (::mkdir(dir.c_str(), mode) == 0 || errno == EEXIST) {
    struct stat st {};
    check(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), ErrorKind::invalid_argument, dir + ": exists and is not a directory");
    return;
  }
  fail(ErrorKind::io, dir + ": cannot create directory: " + std::strerror(errno));
}

void check_dns_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 253;
  size_t start = name.rfind("*.", 0) == 0 ? 2 : 0;  // one leading wildcard label
  size_t label = 0;
  for (size_t i = start; ok && i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      ok = label > 0 && label <= 63 && name[i - 1] != '-' && name[i - label] != '-';
      label = 0;
      continue;
    }
    char c = name[i];
    ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    ++label;
  }
  check(ok, ErrorKind::invalid_argument, "--san '" + name + "' is neither an IP address nor a valid DNS name");
}

void add_subject_alt_names(X509* cert, const std::vector<std::string>& sans) {
  GENERAL_NAMES* gens = sk_GENERAL_NAME_new_null();
  openssl_check(gens != nullptr, "SAN allocation");
  std::unique_ptr<GENERAL_NAMES, void (*)(GENERAL_NAMES*)> guard(gens, [](GENERAL_NAMES* g) { GENERAL_NAMES_free(g); });
  for (const auto& san : sans) {
    GENERAL_NAME* g = GENERAL_NAME_new();
    openssl_check(g != nullptr, "SAN allocation");
    if (ASN1_OCTET_STRING* ip = a2i_IPADDRESS(san.c_str())) {
      GENERAL_NAME_set0_value(g, GEN_IPADD, ip);
    } else {
      ERR_clear_error();
      try {
        check_dns_name(san);
      } catch (...) {
        GENERAL_NAME_free(g);
        throw;
      }
      ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
      openssl_check(dns && ASN1_STRING_set(dns, san.data(), static_cast<int>(san.size())) == 1, "SAN encoding");
      GENERAL_NAME_set0_value(g, GEN_DNS, dns);
    }
    openssl_check(sk_GENERAL_NAME_push(gens, g) > 0, "SAN list");
  }
  openssl_check(X509_add1_ext_i2d(cert, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) == 1, "adding subjectAltName");
}

// Builds and signs a certificate. issuer == nullptr makes it self-signed by subject_key.
Cert build_cert(const std::string& cn, EVP_PKEY* subject_key, X509* issuer, EVP_PKEY* issuer_key, int days, Usage usage,
                const std::vector<std::string>& sans) {
  check(days > 0 && days <= 36500, ErrorKind::invalid_argument, "--days must be between 1 and 36500");
  Cert cert(X509_new());
  openssl_check(cert != nullptr, "X509 allocation");
  openssl_check(X509_set_version(cert.get(), X509_VERSION_3) == 1, "X509 version");
  Integer serial = random_serial();
  openssl_check(X509_set_serialNumber(cert.get(), serial.get()) == 1, "X509 serial");
  Name subject = make_name(cn);
  openssl_check(X509_set_subject_name(cert.get(), subject.get()) == 1, "X509 subject");
  openssl_check(X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : subject.get()) == 1, "X509 issuer");
  openssl_check(X509_set_pubkey(cert.get(), subject_key) == 1, "X509 public key");
  // Back-date five minutes for clock skew between the CA host and its peers.
  openssl_check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) != nullptr, "X509 notBefore");
  openssl_check(X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr) != nullptr, "X509 notAfter");
  if (issuer && ASN1_TIME_compare(X509_get0_notAfter(cert.get()), X509_get0_notAfter(issuer)) > 0)
    openssl_check(X509_set1_notAfter(cert.get(), X509_get0_notAfter(issuer)) == 1, "clamping notAfter to the CA's");

  X509* signer = issuer ? issuer : cert.get();
  add_ext(cert.get(), signer, NID_subject_key_identifier, "hash");
  add_ext(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  switch (usage) {
    case Usage::ca:
      add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
      add_ext(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
      break;
    case Usage::server:
      add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
      add_ext(cert.get(), signer, NID_key_usage, "critical,digitalSignature");
      add_ext(cert.get(), signer, NID_ext_key_usage, "serverAuth");
      add_subject_alt_names(cert.get(), sans);
      break;
    case Usage::client:
      add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
      add_ext(cert.get(), signer, NID_key_usage, "critical,digitalSignature");
      add_ext(cert.get(), signer, NID_ext_key_usage, "clientAuth");
      break;
  }
  openssl_check(X509_sign(cert.get(), issuer_key, EVP_sha256()) > 0, "signing the certificate");
  return cert;
}

std::string time_text(const ASN1_TIME* t) {
  std::unique_ptr<BIO, Free> b(BIO_new(BIO_s_mem()));
  openssl_check(b && ASN1_TIME_print(b.get(), t) == 1, "printing a time");
  char* data = nullptr;
  long n = BIO_get_mem_data(b.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

// Writes key then certificate; refuses up front (before any key is generated) when either exists.
IssuedCert write_leaf(const std::string& cert_path, const std::string& key_path, EVP_PKEY* key, X509* cert, bool force) {
  const WriteMode how = force ? WriteMode::replace : WriteMode::exclusive;
  write_file(key_path, key_to_pem(key), 0600, how);
  write_file(cert_path, cert_to_pem(cert), 0644, how);
  return {cert_path, key_path, serial_hex(X509_get0_serialNumber(cert)), time_text(X509_get0_notAfter(cert))};
}

void refuse_existing(const std::vector<std::string>& paths, bool force) {
  if (force) return;
  for (const auto& p : paths)
    check(!path_exists(p), ErrorKind::invalid_argument, p + ": already exists; refusing to overwrite (pass --force to replace it)");
}

}  // namespace

LoadedCa load_ca(const PkiPaths& p) {
  check(path_exists(p.ca_cert()), ErrorKind::not_found, p.ca_cert() + ": no CA here; run `sanctum certs init --dir " + p.dir + "` first");
  LoadedCa ca{load_cert(p.ca_cert()), load_key(p.ca_key())};
  check(X509_check_private_key(ca.cert.get(), ca.key.get()) == 1, ErrorKind::invalid_input,
        p.ca_key() + " does not belong to " + p.ca_cert());
  ERR_clear_error();
  return ca;
}

void check_client_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 64 && name.front() != '.';
  for (char c : name)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  check(ok, ErrorKind::invalid_argument,
        "client name '" + name + "' must be 1-64 of letters, digits, '.', '_', '-' and not start with '.'");
}

IssuedCert pki_init(const std::string& dir, const std::string& common_name, int days, bool force) {
  PkiPaths p{dir};
  refuse_existing({p.ca_key(), p.ca_cert()}, force);
  make_dir(dir, 0700);
  make_dir(p.clients_dir(), 0700);
  Key key = generate_p256_key();
  Cert cert = build_cert(common_name, key.get(), nullptr, key.get(), days, Usage::ca, {});
  IssuedCert out = write_leaf(p.ca_cert(), p.ca_key(), key.get(), cert.get(), force);
  write_crl(p, {cert.get(), key.get()}, {}, 1, kCrlDays);
  return out;
}

IssuedCert pki_issue_server(const std::string& dir, const std::vector<std::string>& sans, const std::string& common_name, int days,
                            bool force) {
  PkiPaths p{dir};
  check(!sans.empty(), ErrorKind::invalid_argument, "give at least one --san (every address or name clients connect to)");
  refuse_existing({p.server_key(), p.server_cert()}, force);
  LoadedCa ca = load_ca(p);
  Key key = generate_p256_key();
  Cert cert =
      build_cert(common_name.empty() ? sans.front() : common_name, key.get(), ca.cert.get(), ca.key.get(), days, Usage::server, sans);
  return write_leaf(p.server_cert(), p.server_key(), key.get(), cert.get(), force);
}

IssuedCert pki_issue_client(const std::string& dir, const std::string& name, int days, bool force) {
  PkiPaths p{dir};
  check_client_name(name);
  refuse_existing({p.client_key(name), p.client_cert(name)}, force);
  LoadedCa ca = load_ca(p);
  make_dir(p.clients_dir(), 0700);
  Key key = generate_p256_key();
  Cert cert = build_cert(name, key.get(), ca.cert.get(), ca.key.get(), days, Usage::client, {});
  return write_leaf(p.client_cert(name), p.client_key(name), key.get(), cert.get(), force);
}

}  // namespace sanctum::security
