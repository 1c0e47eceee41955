"""sanctum certs end to end, checked by `openssl verify`: valid chains with the right purposes, a revoked
client rejected through the CA-signed CRL, a certificate from another CA rejected, private keys 0600."""
import stat
import subprocess
from pathlib import Path

import pytest

from security_helpers import run


def openssl_verify(ca_dir: Path, cert: Path, purpose: str, crl: bool = True):
    args = ["openssl", "verify", "-x509_strict", "-purpose", purpose, "-CAfile", str(ca_dir / "ca.crt")]
    if crl:
        args += ["-crl_check", "-CRLfile", str(ca_dir / "crl.pem")]
    return subprocess.run(args + [str(cert)], capture_output=True, text=True)


def certs(sanctum_bin, *args):
    r = run(sanctum_bin, "certs", *args)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture
def pki(sanctum_bin, tmp_path) -> Path:
    d = tmp_path / "certs"
    certs(sanctum_bin, "init", "--dir", d)
    certs(sanctum_bin, "server", "--dir", d, "--san", "127.0.0.1", "--san", "localhost", "--san", "::1")
    for name in ("guardian", "canary"):
        certs(sanctum_bin, "client", name, "--dir", d)
    return d


def test_private_keys_are_0600(pki):
    for key in [pki / "ca.key", pki / "server.key", pki / "clients/guardian.key", pki / "clients/canary.key"]:
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


def test_ca_is_ec_p256_valid_for_five_years(pki):
    text = subprocess.run(["openssl", "x509", "-in", str(pki / "ca.crt"), "-noout", "-text"], capture_output=True, text=True, check=True).stdout
    assert "prime256v1" in text or "P-256" in text
    assert "CA:TRUE" in text and "Certificate Sign, CRL Sign" in text
    end = subprocess.run(["openssl", "x509", "-in", str(pki / "ca.crt"), "-noout", "-checkend", str(5 * 365 * 86400 - 86400)])
    assert end.returncode == 0


def test_server_and_client_certificates_verify_with_their_purposes(pki):
    assert openssl_verify(pki, pki / "server.crt", "sslserver").returncode == 0
    assert openssl_verify(pki, pki / "clients/guardian.crt", "sslclient").returncode == 0
    assert openssl_verify(pki, pki / "server.crt", "sslclient").returncode != 0
    assert openssl_verify(pki, pki / "clients/guardian.crt", "sslserver").returncode != 0


def test_server_certificate_names_every_address(pki):
    for check in (["-checkip", "127.0.0.1"], ["-checkip", "::1"], ["-checkhost", "localhost"]):
        out = subprocess.run(["openssl", "x509", "-in", str(pki / "server.crt"), "-noout", *check], capture_output=True, text=True).stdout
        assert "does match" in out and "NOT" not in out, out


def test_client_cn_is_its_name(pki):
    out = subprocess.run(["openssl", "x509", "-in", str(pki / "clients/canary.crt"), "-noout", "-subject"], capture_output=True, text=True).stdout
    assert "CN = canary" in out or "CN=canary" in out


def test_revoked_client_is_rejected_by_crl_and_others_are_not(sanctum_bin, pki):
    r = certs(sanctum_bin, "revoke", "guardian", "--dir", pki)
    assert "SIGHUP" in r.stdout
    bad = openssl_verify(pki, pki / "clients/guardian.crt", "sslclient")
    assert bad.returncode != 0 and "certificate revoked" in bad.stdout + bad.stderr
    assert openssl_verify(pki, pki / "clients/canary.crt", "sslclient").returncode == 0
    crl = subprocess.run(["openssl", "crl", "-in", str(pki / "crl.pem"), "-noout", "-verify", "-CAfile", str(pki / "ca.crt")],
                         capture_output=True, text=True)
    assert crl.returncode == 0 and "verify OK" in crl.stdout + crl.stderr
    again = run(sanctum_bin, "certs", "revoke", "guardian", "--dir", pki)
    assert again.returncode != 0 and "already revoked" in again.stderr


def test_certificate_from_another_ca_is_rejected(sanctum_bin, pki, tmp_path):
    other = tmp_path / "other"
    certs(sanctum_bin, "init", "--dir", other)
    certs(sanctum_bin, "client", "intruder", "--dir", other)
    r = openssl_verify(pki, other / "clients/intruder.crt", "sslclient")
    assert r.returncode != 0 and "unable to get local issuer certificate" in r.stdout + r.stderr


def test_crl_refresh_keeps_revocations(sanctum_bin, pki):
    certs(sanctum_bin, "revoke", "canary", "--dir", pki)
    r = certs(sanctum_bin, "crl", "--dir", pki, "--days", "30")
    assert "1 revoked" in r.stdout
    assert openssl_verify(pki, pki / "clients/canary.crt", "sslclient").returncode != 0


def test_refusals(sanctum_bin, pki, tmp_path):
    assert "already exists" in run(sanctum_bin, "certs", "init", "--dir", pki).stderr
    assert "already exists" in run(sanctum_bin, "certs", "client", "canary", "--dir", pki).stderr
    assert run(sanctum_bin, "certs", "client", "../evil", "--dir", pki).returncode == 2
    assert run(sanctum_bin, "certs", "server", "--dir", pki, "--force").returncode == 2  # no --san
    assert "certs init" in run(sanctum_bin, "certs", "client", "x", "--dir", tmp_path / "nothing").stderr
    (pki / "ca.key").chmod(0o644)
    r = run(sanctum_bin, "certs", "client", "late", "--dir", pki)
    assert r.returncode == 1 and "chmod 600" in r.stderr
