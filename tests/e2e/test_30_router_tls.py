"""`sanctum route` with TLS on both sides, using a PKI made by `sanctum certs`: the router presents
its client certificate to an mTLS-only `sanctum serve` seat (the seat logs the router's CN), refuses
a seat whose certificate its CA did not sign, and serves its own mTLS front where the client
certificate's CN is the identity that budgets and access logs use."""
from __future__ import annotations

import json
import ssl

import pytest

import router_harness as rh
import server_harness as sh
import tls_helpers as th
from server_harness import MODEL


@pytest.fixture(scope="module")
def pki(sanctum_bin, tmp_path_factory):
    return th.make_pki(sanctum_bin, tmp_path_factory.mktemp("router-pki"), ["router", "guardian"])


@pytest.fixture(scope="module")
def foreign(sanctum_bin, tmp_path_factory):
    return th.make_pki(sanctum_bin, tmp_path_factory.mktemp("router-foreign"), ["router"])


@pytest.fixture(scope="module")
def mtls_seat(sanctum_bin, tiny_model, pki, tmp_path_factory):
    port = sh.free_port()
    s = th.Serve(sanctum_bin, tiny_model, tmp_path_factory.mktemp("router-tls-seat") / "seat.log", th.tls_flags(pki, port) + ["--no-plain"])
    s.tls_port = port
    yield s
    s.terminate()


def upstream_tls(pki, client: str = "router") -> dict:
    cert, key = pki.client(client)
    return {"ca": str(pki.ca), "cert": str(cert), "key": str(key)}


def test_router_reaches_an_mtls_seat_with_its_client_certificate(sanctum_bin, pki, mtls_seat, tmp_path):
    r = rh.Router(sanctum_bin, {"health": {"interval_s": 0.2, "timeout_s": 1},
                                "backends": [rh.backend("council", [MODEL], f"https://127.0.0.1:{mtls_seat.tls_port}",
                                                        tier="council-secure", tls=upstream_tls(pki))]}, tmp_path)
    try:
        status, headers, body = rh.chat(r.port, MODEL, request_id="via-mtls", max_tokens=2)
        assert status == 200, body
        assert any(rec.get("identity") == "router" for rec in mtls_seat.access("via-mtls"))  # the seat saw our CN
        status, _, events = rh.stream_events(r.port, MODEL, max_tokens=2)
        assert status == 200 and events[-1] == "[DONE]"
        r.wait_metric("sanctum_router_upstream_healthy", {"backend": "council"}, 1)
    finally:
        r.terminate()


def test_a_seat_signed_by_another_ca_is_refused(sanctum_bin, pki, foreign, mtls_seat, tmp_path):
    # The router trusts only the foreign CA: the real seat's certificate must not verify.
    r = rh.Router(sanctum_bin, {"backends": [rh.backend("council", [MODEL], f"https://127.0.0.1:{mtls_seat.tls_port}",
                                                        tls=upstream_tls(foreign))]}, tmp_path)
    try:
        status, _, body = rh.chat(r.port, MODEL, max_tokens=2)
        assert status == 502
        assert "certificate" in body["error"]["message"]
        assert r.metric("sanctum_router_upstream_attempts_total", {"outcome": "connect_error"}) >= 1
    finally:
        r.terminate()


def test_the_router_front_speaks_mtls_and_uses_the_cn_as_identity(sanctum_bin, pki, tmp_path):
    up = rh.Fault("ok")
    tls_port = sh.free_port()
    r = rh.Router(sanctum_bin, {"listen": {"tls": {"cert": str(pki.server_cert), "key": str(pki.server_key),
                                                   "client_ca": str(pki.ca), "port": tls_port}},
                                "budgets": {"clients": {"guardian": {"requests": 1, "window_s": 30}}},
                                "backends": [rh.backend("b", ["m"], up.url)]}, tmp_path)
    try:
        ctx = th.client_context(pki.ca, *pki.client("guardian"))
        body = sh.chat_body("m")
        status, _, payload, version = th.tls_request(tls_port, ctx, "POST", "/v1/chat/completions", body,
                                                     headers={"X-Request-Id": "cn-1"})
        assert status == 200 and version in ("TLSv1.3", "TLSv1.2")
        assert r.access("cn-1")["identity"] == "guardian"
        status, headers, payload, _ = th.tls_request(tls_port, ctx, "POST", "/v1/chat/completions", body)
        assert status == 429 and json.loads(payload)["error"]["code"] == "budget_exceeded"  # guardian's own budget
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            th.handshake_and_get(tls_port, th.client_context(pki.ca))  # no client certificate
    finally:
        r.terminate()
        up.close()
