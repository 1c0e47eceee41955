// Certificate revocation: the CRL file is the only revocation state. Each change reads it (checking
// the CA signed it), copies its entries, adds or refreshes, bumps the CRL number and re-signs.
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base/error.h"
#include "security/pki_internal.h"
#include "security/secure_io.h"

namespace sanctum::security {
namespace {

using namespace x509;

struct Existing {
  std::vector<X509_REVOKED*> entries;  // owned duplicates
  long crl_number = 0;
};

// Reads crl.pem (if any), refusing one the CA did not sign.
Existing read_existing(const PkiPaths& p, CaRef ca) {
  Existing out;
  if (!path_exists(p.crl())) return out;
  Crl crl = load_crl(p.crl());
  EVP_PKEY* ca_pub = X509_get0_pubkey(ca.cert);
  check(X509_NAME_cmp(X509_CRL_get_issuer(crl.get()), X509_get_subject_name(ca.cert)) == 0 && X509_CRL_verify(crl.get(), ca_pub) == 1,
        ErrorKind::invalid_input, p.crl() + ": not signed by this CA (" + p.ca_cert() + "); move it aside and revoke again");
  ERR_clear_error();
  if (auto* n = static_cast<ASN1_INTEGER*>(X509_CRL_get_ext_d2i(crl.get(), NID_crl_number, nullptr, nullptr))) {
    out.crl_number = ASN1_INTEGER_get(n);
    ASN1_INTEGER_free(n);
  }
  STACK_OF(X509_REVOKED)* revoked = X509_CRL_get_REVOKED(crl.get());
  for (int i = 0; i < sk_X509_REVOKED_num(revoked); ++i) {
    X509_REVOKED* dup = X509_REVOKED_dup(sk_X509_REVOKED_value(revoked, i));
    openssl_check(dup != nullptr, "copying a CRL entry");
    out.entries.push_back(dup);
  }
  return out;
}

void free_entries(std::vector<X509_REVOKED*>& entries) {
  for (auto* e : entries) X509_REVOKED_free(e);
  entries.clear();
}

}  // namespace

void write_crl(const PkiPaths& p, CaRef ca, std::vector<X509_REVOKED*> entries, long crl_number, int days) {
  Crl crl(X509_CRL_new());
  if (!crl) free_entries(entries);
  openssl_check(crl != nullptr, "CRL allocation");
  for (size_t i = 0; i < entries.size(); ++i) {
    if (X509_CRL_add0_revoked(crl.get(), entries[i]) != 1) {
      for (size_t j = i; j < entries.size(); ++j) X509_REVOKED_free(entries[j]);  // earlier ones belong to crl now
      openssl_check(false, "adding a CRL entry");
    }
  }
  entries.clear();
  check(days > 0 && days <= 3650, ErrorKind::invalid_argument, "CRL validity must be between 1 and 3650 days");
  openssl_check(X509_CRL_set_version(crl.get(), X509_CRL_VERSION_2) == 1, "CRL version");
  openssl_check(X509_CRL_set_issuer_name(crl.get(), X509_get_subject_name(ca.cert)) == 1, "CRL issuer");
  Time now(X509_gmtime_adj(nullptr, 0));
  Time next(X509_time_adj_ex(nullptr, days, 0, nullptr));
  openssl_check(now && next && X509_CRL_set1_lastUpdate(crl.get(), now.get()) == 1 && X509_CRL_set1_nextUpdate(crl.get(), next.get()) == 1,
                "CRL validity");

  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, ca.cert, nullptr, nullptr, crl.get(), 0);
  Extension aki(X509V3_EXT_nconf_nid(nullptr, &ctx, NID_authority_key_identifier, "keyid:always"));
  openssl_check(aki && X509_CRL_add_ext(crl.get(), aki.get(), -1) == 1, "CRL authorityKeyIdentifier");
  Integer number(ASN1_INTEGER_new());
  openssl_check(number && ASN1_INTEGER_set(number.get(), crl_number) == 1, "CRL number");
  openssl_check(X509_CRL_add1_ext_i2d(crl.get(), NID_crl_number, number.get(), 0, 0) == 1, "CRL number extension");

  openssl_check(X509_CRL_sort(crl.get()) == 1, "sorting the CRL");
  openssl_check(X509_CRL_sign(crl.get(), ca.key, EVP_sha256()) > 0, "signing the CRL");
  write_file(p.crl(), crl_to_pem(crl.get()), 0644, WriteMode::replace);
}

RevokeResult pki_revoke(const std::string& dir, const std::string& name) {
  PkiPaths p{dir};
  check_client_name(name);
  LoadedCa ca = load_ca(p);
  check(path_exists(p.client_cert(name)), ErrorKind::not_found, p.client_cert(name) + ": no such client certificate");
  Cert cert = load_cert(p.client_cert(name));
  check(X509_NAME_cmp(X509_get_issuer_name(cert.get()), X509_get_subject_name(ca.cert.get())) == 0 &&
            X509_verify(cert.get(), X509_get0_pubkey(ca.cert.get())) == 1,
        ErrorKind::invalid_input, p.client_cert(name) + " was not issued by this CA (" + p.ca_cert() + ")");
  ERR_clear_error();

  Existing existing = read_existing(p, {ca.cert.get(), ca.key.get()});
  const ASN1_INTEGER* serial = X509_get0_serialNumber(cert.get());
  RevokeResult result{serial_hex(serial), existing.entries.size() + 1};
  for (auto* e : existing.entries) {
    if (ASN1_INTEGER_cmp(X509_REVOKED_get0_serialNumber(e), serial) == 0) {
      free_entries(existing.entries);
      fail(ErrorKind::invalid_argument, "client '" + name + "' (serial " + result.serial_hex + ") is already revoked in " + p.crl());
    }
  }
  X509_REVOKED* entry = X509_REVOKED_new();
  Time now(X509_gmtime_adj(nullptr, 0));
  Integer serial_copy(ASN1_INTEGER_dup(serial));
  if (!entry || !now || !serial_copy || X509_REVOKED_set_serialNumber(entry, serial_copy.get()) != 1 ||
      X509_REVOKED_set_revocationDate(entry, now.get()) != 1) {
    X509_REVOKED_free(entry);
    free_entries(existing.entries);
    openssl_check(false, "building the CRL entry");
  }
  existing.entries.push_back(entry);
  write_crl(p, {ca.cert.get(), ca.key.get()}, std::move(existing.entries), existing.crl_number + 1, kCrlDays);
  return result;
}

size_t pki_refresh_crl(const std::string& dir, int days) {
  PkiPaths p{dir};
  LoadedCa ca = load_ca(p);
  Existing existing = read_existing(p, {ca.cert.get(), ca.key.get()});
  size_t n = existing.entries.size();
  write_crl(p, {ca.cert.get(), ca.key.get()}, std::move(existing.entries), existing.crl_number + 1, days);
  return n;
}

}  // namespace sanctum::security
