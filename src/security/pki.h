#pragma once
// A small PKI for mTLS: one EC P-256 CA, a server certificate with a SAN for every bind address,
// per-client certificates (CN = client name, the identity the server logs), and a CRL the CA signs.
// Layout under DIR:
//   ca.crt, ca.key (0600)        self-signed CA
//   crl.pem                      revocation list, re-signed on every revoke (and by refresh_crl)
//   server.crt, server.key (0600)
//   clients/NAME.crt, clients/NAME.key (0600)
#include <string>
#include <vector>

namespace sanctum::security {

struct PkiPaths {
  std::string dir;
  std::string ca_cert() const { return dir + "/ca.crt"; }
  std::string ca_key() const { return dir + "/ca.key"; }
  std::string crl() const { return dir + "/crl.pem"; }
  std::string server_cert() const { return dir + "/server.crt"; }
  std::string server_key() const { return dir + "/server.key"; }
  std::string clients_dir() const { return dir + "/clients"; }
  std::string client_cert(const std::string& name) const { return clients_dir() + "/" + name + ".crt"; }
  std::string client_key(const std::string& name) const { return clients_dir() + "/" + name + ".key"; }
};

inline constexpr int kCaDays = 1826;   // five years
inline constexpr int kLeafDays = 825;  // clamped to the CA's own expiry
inline constexpr int kCrlDays = 365;   // the CRL's nextUpdate; re-sign before then (certs crl)

struct IssuedCert {
  std::string cert_path, key_path;
  std::string serial_hex;
  std::string not_after;  // as OpenSSL prints it
};

// Creates DIR (0700) if needed, the CA and an empty CRL. Refuses to replace an existing CA unless force.
IssuedCert pki_init(const std::string& dir, const std::string& common_name, int days, bool force);

// Server certificate (serverAuth) with each SAN as an IP address when it parses as one, else a DNS name.
IssuedCert pki_issue_server(const std::string& dir, const std::vector<std::string>& sans, const std::string& common_name, int days,
                            bool force);

// Client certificate (clientAuth), CN = name. name: letters, digits, '.', '_', '-' (it is a file name).
IssuedCert pki_issue_client(const std::string& dir, const std::string& name, int days, bool force);

// Adds clients/NAME.crt's serial to the CRL and re-signs it. Throws if already revoked or not
// issued by this CA.
struct RevokeResult {
  std::string serial_hex;
  size_t revoked_total = 0;
};
RevokeResult pki_revoke(const std::string& dir, const std::string& name);

// Re-signs the CRL with the same entries, a fresh lastUpdate and nextUpdate = now + days.
size_t pki_refresh_crl(const std::string& dir, int days);

// Checks a client name: [A-Za-z0-9._-]{1,64}, not starting with '.'. Throws invalid_argument.
void check_client_name(const std::string& name);

}  // namespace sanctum::security
