#pragma once
// Shared between pki.cc (issuing) and crl.cc (revocation); not part of the public PKI API.
#include <openssl/x509.h>

#include <vector>

#include "security/pki.h"
#include "security/x509_util.h"

namespace sanctum::security {

struct LoadedCa {
  x509::Cert cert;
  x509::Key key;
};

// Loads ca.crt and ca.key (0600 enforced) and checks they belong together.
LoadedCa load_ca(const PkiPaths& p);

struct CaRef {
  X509* cert;
  EVP_PKEY* key;
};

// Signs and writes crl.pem with the given entries (ownership taken), CRL number and validity.
void write_crl(const PkiPaths& p, CaRef ca, std::vector<X509_REVOKED*> entries, long crl_number, int days);

}  // namespace sanctum::security
