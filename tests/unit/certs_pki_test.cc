// The mTLS PKI: certificates chain to the CA with the right purposes, private keys are 0600, and a
// revoked client fails verification against the CA-signed CRL while others still pass.
#include <gtest/gtest.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "security/pki.h"
#include "security/x509_util.h"

namespace {

using sanctum::Error;
using namespace sanctum::security;
namespace fs = std::filesystem;

struct Pki : ::testing::Test {
  fs::path dir;
  PkiPaths p;
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sanctum-pki-XXXXXX").string();
    dir = fs::path(::mkdtemp(tmpl.data())) / "certs";
    p = PkiPaths{dir.string()};
    pki_init(p.dir, "test CA", kCaDays, false);
  }
  void TearDown() override { fs::remove_all(dir.parent_path()); }

  // X509_verify_cert against ca.crt (and crl.pem when with_crl) for `purpose`; returns the error code.
  int verify(const std::string& cert_path, int purpose, bool with_crl) {
    x509::Cert ca = x509::load_cert(p.ca_cert()), leaf = x509::load_cert(cert_path);
    x509::Crl crl = x509::load_crl(p.crl());
    X509_STORE* store = X509_STORE_new();
    X509_STORE_add_cert(store, ca.get());
    if (with_crl) {
      X509_STORE_add_crl(store, crl.get());
      X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_X509_STRICT);
    }
    X509_STORE_CTX* ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, store, leaf.get(), nullptr);
    X509_STORE_CTX_set_purpose(ctx, purpose);
    int ok = X509_verify_cert(ctx);
    int err = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return err;
  }
  static unsigned mode_of(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0;
  }
};

TEST_F(Pki, InitWritesAPrivateCaKeyAndAnEmptySignedCrl) {
  EXPECT_EQ(mode_of(p.ca_key()), 0600u);
  EXPECT_EQ(mode_of(p.dir), 0700u);
  x509::Crl crl = x509::load_crl(p.crl());
  EXPECT_LE(sk_X509_REVOKED_num(X509_CRL_get_REVOKED(crl.get())), 0);  // -1: no revoked list at all
  x509::Cert ca = x509::load_cert(p.ca_cert());
  EXPECT_EQ(X509_CRL_verify(crl.get(), X509_get0_pubkey(ca.get())), 1);
  EXPECT_EQ(EVP_PKEY_get_base_id(X509_get0_pubkey(ca.get())), EVP_PKEY_EC);
  EXPECT_EQ(X509_check_ca(ca.get()), 1);
}

TEST_F(Pki, InitRefusesToReplaceACaWithoutForce) {
  EXPECT_THROW(pki_init(p.dir, "again", kCaDays, false), Error);
  EXPECT_NO_THROW(pki_init(p.dir, "again", kCaDays, true));
}

TEST_F(Pki, ServerCertificateCarriesEverySanAndServerAuth) {
  pki_issue_server(p.dir, {"127.0.0.1", "localhost", "::1", "node-1.example"}, "", kLeafDays, false);
  EXPECT_EQ(mode_of(p.server_key()), 0600u);
  EXPECT_EQ(verify(p.server_cert(), X509_PURPOSE_SSL_SERVER, true), X509_V_OK);
  EXPECT_EQ(verify(p.server_cert(), X509_PURPOSE_SSL_CLIENT, false), X509_V_ERR_INVALID_PURPOSE);
  x509::Cert cert = x509::load_cert(p.server_cert());
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "::1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "10.0.0.1", 0), 0);
  EXPECT_EQ(X509_check_host(cert.get(), "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(cert.get(), "node-1.example", 0, 0, nullptr), 1);
}

TEST_F(Pki, ServerNeedsAValidSan) {
  EXPECT_THROW(pki_issue_server(p.dir, {}, "", kLeafDays, false), Error);
  EXPECT_THROW(pki_issue_server(p.dir, {"bad name,DNS:evil.example"}, "", kLeafDays, false), Error);
  EXPECT_FALSE(fs::exists(p.server_cert()));
}

TEST_F(Pki, ClientCertificateHasItsNameAsCnAndClientAuth) {
  pki_issue_client(p.dir, "guardian", kLeafDays, false);
  EXPECT_EQ(mode_of(p.client_key("guardian")), 0600u);
  EXPECT_EQ(verify(p.client_cert("guardian"), X509_PURPOSE_SSL_CLIENT, true), X509_V_OK);
  EXPECT_EQ(verify(p.client_cert("guardian"), X509_PURPOSE_SSL_SERVER, false), X509_V_ERR_INVALID_PURPOSE);
  x509::Cert cert = x509::load_cert(p.client_cert("guardian"));
  EXPECT_EQ(x509::common_name(cert.get()), "guardian");
  EXPECT_THROW(pki_issue_client(p.dir, "guardian", kLeafDays, false), Error);
}

TEST_F(Pki, ClientNamesThatAreNotPlainFileNamesAreRefused) {
  for (const char* bad : {"", "../x", "a/b", ".hidden", "white space", "cn=x,o=y"}) EXPECT_THROW(check_client_name(bad), Error) << bad;
  EXPECT_NO_THROW(check_client_name("parity-smoke_2.v1"));
}

TEST_F(Pki, LeafNeverOutlivesTheCa) {
  pki_init(p.dir, "short CA", 10, true);
  pki_issue_client(p.dir, "c", 825, false);
  x509::Cert ca = x509::load_cert(p.ca_cert()), leaf = x509::load_cert(p.client_cert("c"));
  EXPECT_LE(ASN1_TIME_compare(X509_get0_notAfter(leaf.get()), X509_get0_notAfter(ca.get())), 0);
}

TEST_F(Pki, RevokedClientFailsCrlCheckOthersStillPass) {
  pki_issue_client(p.dir, "guardian", kLeafDays, false);
  pki_issue_client(p.dir, "canary", kLeafDays, false);
  RevokeResult r = pki_revoke(p.dir, "guardian");
  EXPECT_EQ(r.revoked_total, 1u);
  EXPECT_EQ(verify(p.client_cert("guardian"), X509_PURPOSE_SSL_CLIENT, true), X509_V_ERR_CERT_REVOKED);
  EXPECT_EQ(verify(p.client_cert("canary"), X509_PURPOSE_SSL_CLIENT, true), X509_V_OK);
  EXPECT_THROW(pki_revoke(p.dir, "guardian"), Error);  // twice is an error, and the CRL is unchanged
  EXPECT_EQ(pki_revoke(p.dir, "canary").revoked_total, 2u);
  EXPECT_EQ(pki_refresh_crl(p.dir, 30), 2u);
  EXPECT_EQ(verify(p.client_cert("guardian"), X509_PURPOSE_SSL_CLIENT, true), X509_V_ERR_CERT_REVOKED);
}

TEST_F(Pki, CertificateFromAnotherCaIsNotRevocableHereAndDoesNotVerify) {
  fs::path other = dir.parent_path() / "other";
  pki_init(other.string(), "other CA", kCaDays, false);
  pki_issue_client(other.string(), "intruder", kLeafDays, false);
  fs::copy_file(PkiPaths{other.string()}.client_cert("intruder"), p.client_cert("intruder"));
  EXPECT_EQ(verify(p.client_cert("intruder"), X509_PURPOSE_SSL_CLIENT, false), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
  EXPECT_THROW(pki_revoke(p.dir, "intruder"), Error);
}

TEST_F(Pki, CaKeyReadableByOthersIsRefused) {
  fs::permissions(p.ca_key(), fs::perms::group_read, fs::perm_options::add);
  try {
    pki_issue_client(p.dir, "c", kLeafDays, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
  }
}

}  // namespace
