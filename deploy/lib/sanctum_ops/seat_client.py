"""Talking to a seat over HTTP or mTLS with the standard library: the cheap liveness probe
(GET /v1/models, which never enters the inference queue) and a temperature-0 chat request."""
from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path


class ProbeError(Exception):
    """The seat did not give a usable answer; the message says what happened."""


@dataclass
class SeatClient:
    url: str
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    bearer_token_file: str | None = None
    model: str | None = None

    @classmethod
    def from_args(cls, args) -> "SeatClient":
        return cls(args.url.rstrip("/"), args.ca_cert, args.client_cert, args.client_key, args.bearer_token_file,
                   args.model)

    def _context(self) -> ssl.SSLContext | None:
        if not self.url.startswith("https://"):
            return None
        ctx = ssl.create_default_context(cafile=self.ca_cert)
        if self.client_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx

    def _request(self, method: str, path: str, body: dict | None, timeout: float) -> dict:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            context = self._context()
            if self.bearer_token_file:
                headers["Authorization"] = "Bearer " + Path(self.bearer_token_file).read_text().strip()
        except OSError as e:  # unreadable certificate, key or token: a configuration problem
            raise ProbeError(f"client credentials: {e}")
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as e:
            raise ProbeError(f"HTTP {e.code} from {method} {path}")
        except (urllib.error.URLError, OSError, ssl.SSLError) as e:
            reason = getattr(e, "reason", e)
            raise ProbeError(f"{method} {path}: {reason}")
        try:
            return json.loads(payload)
        except ValueError:
            raise ProbeError(f"{method} {path}: response is not JSON")

    def models(self, timeout: float) -> tuple[list[str], float]:
        """Model ids the seat lists, and the probe's latency in ms."""
        t0 = time.monotonic()
        doc = self._request("GET", "/v1/models", None, timeout)
        latency_ms = (time.monotonic() - t0) * 1000
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, list) or not data:
            raise ProbeError("GET /v1/models: no models listed")
        return [m.get("id", "?") for m in data if isinstance(m, dict)], latency_ms

    def chat(self, messages: list[dict], timeout: float, max_tokens: int, tools: list | None = None) -> tuple[str, float]:
        """The assistant's reply at temperature 0, and the request's latency in ms. With tools, each call
        the seat parsed follows the text as name({arguments as JSON}), one per line."""
        body = {"messages": messages, "temperature": 0, "max_tokens": max_tokens}
        if self.model:
            body["model"] = self.model
        if tools:
            body["tools"] = tools
        t0 = time.monotonic()
        doc = self._request("POST", "/v1/chat/completions", body, timeout)
        latency_ms = (time.monotonic() - t0) * 1000
        try:
            message = doc["choices"][0]["message"]
            content = message["content"]
        except (KeyError, IndexError, TypeError):
            raise ProbeError("POST /v1/chat/completions: no choices[0].message.content in the response")
        lines = [content] if isinstance(content, str) and content else []
        for call in message.get("tool_calls") or []:
            try:
                f = call["function"]
                lines.append(f["name"] + "(" + json.dumps(json.loads(f["arguments"]), ensure_ascii=False) + ")")
            except (KeyError, TypeError, ValueError):
                raise ProbeError("POST /v1/chat/completions: a tool call without a name or JSON arguments")
        return "\n".join(lines), latency_ms
