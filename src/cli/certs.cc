// sanctum certs init|server|client|revoke|crl: the small PKI behind mTLS (see security/pki.h).
#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.h"
#include "cli/args.h"
#include "cli/command.h"
#include "security/pki.h"

namespace {

using namespace sanctum;
using namespace sanctum::security;

const char* kUsage =
    "usage:\n"
    "  sanctum certs init --dir D [--cn NAME] [--days N] [--force]\n"
    "      EC P-256 CA (default 1826 days): D/ca.crt, D/ca.key (0600), empty signed D/crl.pem\n"
    "  sanctum certs server --dir D --san ADDR [--san ADDR ...] [--cn NAME] [--days N] [--force]\n"
    "      server certificate (serverAuth); each --san is an IP address or DNS name clients dial\n"
    "  sanctum certs client NAME --dir D [--days N] [--force]\n"
    "      client certificate (clientAuth, CN=NAME): D/clients/NAME.crt, NAME.key (0600)\n"
    "  sanctum certs revoke NAME --dir D\n"
    "      add NAME's certificate to D/crl.pem and re-sign it (then SIGHUP the server)\n"
    "  sanctum certs crl --dir D [--days N]\n"
    "      re-sign D/crl.pem with a fresh nextUpdate (default 365 days); do this before it expires\n";

std::string dir_flag(const cli::Args& a) {
  auto d = a.get("dir");
  check(d && !d->empty(), ErrorKind::invalid_argument, "--dir is required (the PKI directory, e.g. ~/.sanctum/certs)");
  return *d;
}

int days_flag(const cli::Args& a, int fallback) {
  long long d = a.get_int("days", fallback);
  check(d > 0 && d <= 36500, ErrorKind::invalid_argument, "--days must be between 1 and 36500");
  return static_cast<int>(d);
}

void no_positionals(const cli::Args& a, const char* action) {
  check(a.positionals().size() == 1, ErrorKind::invalid_argument,
        std::string(action) + " takes no positional arguments (see sanctum certs --help)");
}

std::string name_positional(const cli::Args& a, const char* action) {
  check(a.positionals().size() == 2, ErrorKind::invalid_argument,
        std::string(action) + " needs exactly one client NAME (see sanctum certs --help)");
  return a.positionals()[1];
}

void print_issued(const char* what, const IssuedCert& c) {
  std::printf("%s: %s (key %s, 0600), serial %s, valid until %s\n", what, c.cert_path.c_str(), c.key_path.c_str(), c.serial_hex.c_str(),
              c.not_after.c_str());
}

int run_certs(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string action = argv[1];
  if (action == "init") {
    cli::Args a(argc, argv, {"dir", "cn", "days"}, {"force"});
    no_positionals(a, "init");
    IssuedCert c = pki_init(dir_flag(a), a.get_or("cn", "sanctum CA"), days_flag(a, kCaDays), a.has("force"));
    print_issued("CA", c);
    std::printf("CRL: %s/crl.pem (empty)\n", dir_flag(a).c_str());
    return 0;
  }
  if (action == "server") {
    cli::Args a(argc, argv, {"dir", "san", "cn", "days"}, {"force"});
    no_positionals(a, "server");
    IssuedCert c = pki_issue_server(dir_flag(a), a.get_all("san"), a.get_or("cn", ""), days_flag(a, kLeafDays), a.has("force"));
    print_issued("server certificate", c);
    return 0;
  }
  if (action == "client") {
    cli::Args a(argc, argv, {"dir", "days"}, {"force"});
    IssuedCert c = pki_issue_client(dir_flag(a), name_positional(a, "client"), days_flag(a, kLeafDays), a.has("force"));
    print_issued("client certificate", c);
    return 0;
  }
  if (action == "revoke") {
    cli::Args a(argc, argv, {"dir"}, {});
    const std::string name = name_positional(a, "revoke");
    RevokeResult r = pki_revoke(dir_flag(a), name);
    std::printf("revoked client '%s' (serial %s); %s/crl.pem now lists %zu revoked certificate(s). Reload the server (SIGHUP) to apply.\n",
                name.c_str(), r.serial_hex.c_str(), dir_flag(a).c_str(), r.revoked_total);
    return 0;
  }
  if (action == "crl") {
    cli::Args a(argc, argv, {"dir", "days"}, {});
    no_positionals(a, "crl");
    size_t n = pki_refresh_crl(dir_flag(a), static_cast<int>(std::min<long long>(days_flag(a, kCrlDays), 3650)));
    std::printf("re-signed %s/crl.pem (%zu revoked certificate(s))\n", dir_flag(a).c_str(), n);
    return 0;
  }
  fail(ErrorKind::invalid_argument, "unknown certs action '" + action + "' (init, server, client, revoke, crl)");
}

cli::SubcommandRegistration reg("certs", "init|server|client|revoke|crl: CA, server/client certificates and CRL for mTLS", run_certs);

}  // namespace
