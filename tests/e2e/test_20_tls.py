"""The mTLS listener, with real handshakes from Python's ssl module and certificates made by
`sanctum certs`: no client certificate, or one from another CA, is rejected at the handshake; a
valid one gets 200 and its CN lands in the access log; a revoked one works until the CRL is
reloaded with SIGHUP and is rejected after (the server stays up, and its open keep-alive connections
are closed); --no-plain leaves no plain port."""
from __future__ import annotations

import http.client
import json
import signal
import ssl
import subprocess
import time

import pytest

import server_harness as sh
import tls_helpers as th
from server_harness import MODEL

REJECTED = (ssl.SSLError, ConnectionError, OSError)


def rejected_for(server, reason: str, timeout: float = 5.0) -> None:
    """The server itself logged a handshake rejection for this reason (not just the client giving up)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(r.get("msg") == "TLS handshake rejected" and reason in r.get("reason", "") for r in server.records()):
            return
        time.sleep(0.05)
    raise AssertionError(f"no handshake rejection for '{reason}': {server.logs()[-2000:]}")


@pytest.fixture(scope="module")
def pki(sanctum_bin, tmp_path_factory):
    return th.make_pki(sanctum_bin, tmp_path_factory.mktemp("pki"), ["guardian", "canary", "mallory"])


@pytest.fixture(scope="module")
def foreign(sanctum_bin, tmp_path_factory):
    return th.make_pki(sanctum_bin, tmp_path_factory.mktemp("foreign-pki"), ["guardian"])


@pytest.fixture(scope="module")
def mtls(sanctum_bin, tiny_model, pki, tmp_path_factory):
    """mTLS only (--no-plain), as the council seat runs."""
    tls_port = sh.free_port()
    s = th.Serve(sanctum_bin, tiny_model, tmp_path_factory.mktemp("tls-logs") / "server.log",
                 th.tls_flags(pki, tls_port) + ["--no-plain"])
    s.tls_port = tls_port
    yield s
    s.terminate()


def test_a_valid_certificate_gets_200_over_tls13_and_its_cn_is_logged(mtls, pki):
    ctx = th.client_context(pki.ca, *pki.client("guardian"))
    status, headers, body, version = th.tls_request(mtls.tls_port, ctx, headers={"X-Request-Id": "tls-ok-1"})
    assert status == 200 and json.loads(body)["status"] == "ok"
    assert version == "TLSv1.3"
    status, _, body, _ = th.tls_request(mtls.tls_port, ctx, "POST", "/v1/chat/completions", sh.chat_body(MODEL, max_tokens=2),
                                        headers={"X-Request-Id": "tls-ok-2"})
    assert status == 200 and json.loads(body)["choices"]
    time.sleep(0.1)
    for rid in ("tls-ok-1", "tls-ok-2"):
        rec = mtls.access(rid)
        assert len(rec) == 1 and rec[0]["identity"] == "guardian" and rec[0]["client"].startswith("127.0.0.1:")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tls12_is_the_floor(mtls, pki):
    ctx = th.client_context(pki.ca, *pki.client("guardian"))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    status, _, _, version = th.tls_request(mtls.tls_port, ctx)
    assert status == 200 and version == "TLSv1.2"
    old = th.client_context(pki.ca, *pki.client("guardian"))
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises(REJECTED):
        th.tls_request(mtls.tls_port, old)
    rejected_for(mtls, "unsupported protocol")


def test_no_client_certificate_is_rejected_at_the_handshake(mtls, pki):
    with pytest.raises(REJECTED):
        th.handshake_and_get(mtls.tls_port, th.client_context(pki.ca))
    rejected_for(mtls, "peer did not return a certificate")


def test_a_certificate_from_another_ca_is_rejected(mtls, pki, foreign):
    with pytest.raises(REJECTED):
        th.handshake_and_get(mtls.tls_port, th.client_context(pki.ca, *foreign.client("guardian")))
    rejected_for(mtls, "unable to get local issuer certificate")


def test_the_plain_port_refuses_connections_with_no_plain(mtls):
    assert th.connect_refused(mtls.port)


def test_streaming_works_through_tls(mtls, pki):
    ctx = th.client_context(pki.ca, *pki.client("canary"))
    conn = http.client.HTTPSConnection("127.0.0.1", mtls.tls_port, context=ctx, timeout=30)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(sh.chat_body(MODEL, stream=True, max_tokens=8)),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    text = resp.read().decode()
    conn.close()
    assert text.rstrip().endswith("data: [DONE]")


def test_a_revoked_certificate_is_rejected_after_sighup(sanctum_bin, tiny_model, pki, tmp_path):
    tls_port = sh.free_port()
    s = th.Serve(sanctum_bin, tiny_model, tmp_path / "revoke.log", th.tls_flags(pki, tls_port))
    try:
        ctx = th.client_context(pki.ca, *pki.client("mallory"))
        assert th.tls_request(tls_port, ctx)[0] == 200
        # A keep-alive connection opened before the revocation.
        kept = http.client.HTTPSConnection("127.0.0.1", tls_port, context=ctx, timeout=10)
        kept.request("GET", "/health")
        assert kept.getresponse().read() and kept.sock is not None

        th.revoke(sanctum_bin, pki, "mallory")
        assert th.tls_request(tls_port, ctx)[0] == 200, "the old CRL is in force until SIGHUP"
        s.proc.send_signal(signal.SIGHUP)
        s.wait_for_log("SIGHUP: TLS certificates and CRL reloaded")
        with pytest.raises(REJECTED):
            th.handshake_and_get(tls_port, th.client_context(pki.ca, *pki.client("mallory")))
        rejected_for(s, "certificate revoked")
        # The open connection is closed within the pump's re-check interval.
        time.sleep(1.5)
        with pytest.raises((http.client.HTTPException, ConnectionError, ssl.SSLError, OSError)):
            kept.request("GET", "/health")
            kept.getresponse().read()
        kept.close()
        s.wait_for_log("TLS: closing a connection whose client certificate no longer verifies")
        # Everyone else, and the plain listener, carry on.
        assert th.tls_request(tls_port, th.client_context(pki.ca, *pki.client("guardian")))[0] == 200
        assert sh.request(s.port, "GET", "/health")[0] == 200
        assert s.proc.poll() is None
    finally:
        assert s.terminate() == 0


def test_a_failed_reload_keeps_the_previous_certificates(sanctum_bin, tiny_model, tmp_path):
    pki = th.make_pki(sanctum_bin, tmp_path / "pki", ["guardian"])
    tls_port = sh.free_port()
    s = th.Serve(sanctum_bin, tiny_model, tmp_path / "bad-reload.log", th.tls_flags(pki, tls_port))
    try:
        pki.crl.write_text("not a CRL\n")
        s.proc.send_signal(signal.SIGHUP)
        s.wait_for_log("SIGHUP: reload failed, the previous certificates stay in use")
        assert th.tls_request(tls_port, th.client_context(pki.ca, *pki.client("guardian")))[0] == 200
    finally:
        assert s.terminate() == 0


def test_no_plain_without_tls_and_missing_tls_files_are_refused(sanctum_bin, tiny_model, pki, tmp_path):
    def serve(*extra):
        return subprocess.run([sanctum_bin, "serve", "--model", str(tiny_model), "--port", str(sh.free_port()), *extra],
                              capture_output=True, text=True, timeout=60)
    r = serve("--no-plain")
    assert r.returncode == 2 and "--no-plain" in r.stderr
    r = serve("--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key))
    assert r.returncode == 2 and "--tls-client-ca" in r.stderr
    loose = tmp_path / "server.key"
    loose.write_bytes(pki.server_key.read_bytes())
    loose.chmod(0o644)
    r = serve("--tls-cert", str(pki.server_cert), "--tls-key", str(loose), "--tls-client-ca", str(pki.ca))
    assert r.returncode != 0 and "--tls-key" in r.stderr and "chmod 600" in r.stderr
