"""A fault-injecting OpenAI-style upstream for the router tests (Python stdlib only).

Speaks just enough of /v1/chat/completions, /v1/completions, /v1/models and /health to stand in for
a `sanctum serve`, and misbehaves on demand. The mode is set at start (--mode) or at run time with
POST /_fault {"mode": ..., ...}; GET /_stats returns how many requests each path got.

Modes:
  ok            answers normally with `answer` (stream or not)
  status        answers every completion with HTTP `status` (500, 503, 400, 429 ...)
  hang          reads a completion request and never answers (GET probes still answer: the
                process is up, the model is stuck)
  stall         (streams) sends `events` content events, then goes silent forever
  die           (streams) sends `events` content events, then drops the connection
  repeat        a degenerate loop: "190/ / " over and over
  bad_utf8      content carrying raw invalid UTF-8 bytes
  empty         an empty completion
The canary question (a prompt containing "2+2") is answered with `canary_answer` in every mode
except hang/status, so a canary can fail while ordinary answers look fine.

Run: python fault_upstream.py --port N [--mode ok] [--answer TEXT] [--canary-answer TEXT]
"""
from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOOP_UNIT = "190/ / "


class State:
    def __init__(self, mode: str, answer: str, canary_answer: str):
        self.lock = threading.Lock()
        self.config = {"mode": mode, "answer": answer, "canary_answer": canary_answer, "status": 500, "events": 3,
                       "delay": 0.0}
        self.stats: dict[str, int] = {}

    def get(self) -> dict:
        with self.lock:
            return dict(self.config)

    def count(self, key: str) -> None:
        with self.lock:
            self.stats[key] = self.stats.get(key, 0) + 1


def completion_text(cfg: dict, prompt: str) -> str | bytes:
    if "2+2" in prompt:
        return cfg["canary_answer"]
    mode = cfg["mode"]
    if mode == "repeat":
        return LOOP_UNIT * 40
    if mode == "bad_utf8":
        return b"fine so far \xff\xfe\xc3( broken"
    if mode == "empty":
        return ""
    return cfg["answer"]


def json_bytes_with_raw(obj: dict, raw: bytes | None) -> bytes:
    """JSON where the content string carries `raw` bytes verbatim (json.dumps cannot emit invalid UTF-8)."""
    if raw is None:
        return json.dumps(obj).encode()
    marker = "@@RAW@@"
    return json.dumps(obj).replace(marker, "\x00RAW\x00").encode().replace(b"\x00RAW\x00", raw)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State

    def log_message(self, fmt, *args):  # quiet
        pass

    def setup(self):
        super().setup()
        with self.server.live_lock:
            self.server.live.add(self.connection)

    def finish(self):
        with self.server.live_lock:
            self.server.live.discard(self.connection)
        super().finish()

    def send_json(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.state.count("GET " + self.path)
        if self.path == "/_stats":
            with self.state.lock:
                body = json.dumps(self.state.stats).encode()
            return self.send_json(200, body)
        if self.path == "/v1/models":
            return self.send_json(200, json.dumps({"object": "list", "data": [{"id": "fault", "object": "model"}]}).encode())
        if self.path == "/health":
            return self.send_json(200, b'{"status":"ok"}')
        self.send_json(404, b'{"error":{"message":"not found","type":"invalid_request_error"}}')

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length) if length else b""
        if self.path == "/_fault":
            with self.state.lock:
                self.state.config.update(json.loads(raw))
            return self.send_json(200, b"{}")
        try:
            req = json.loads(raw)
        except ValueError:
            return self.send_json(400, b'{"error":{"message":"bad json","type":"invalid_request_error"}}')
        prompt = json.dumps(req.get("messages", req.get("prompt", "")))
        canary = "2+2" in prompt
        self.state.count(("canary " if canary else "POST ") + self.path)
        cfg = self.state.get()
        if cfg["delay"]:
            time.sleep(cfg["delay"])
        mode = cfg["mode"]
        if mode == "hang":
            time.sleep(3600)
            return
        if mode == "status":
            status = int(cfg["status"])
            kind = "invalid_request_error" if status < 500 else "server_error"
            return self.send_json(status, json.dumps({"error": {"message": f"injected {status}", "type": kind}}).encode())
        text = completion_text(cfg, prompt)
        chat = self.path.endswith("/chat/completions")
        if req.get("stream"):
            return self.stream(cfg, text, chat, canary)
        raw_bytes = text if isinstance(text, bytes) else None
        content = "@@RAW@@" if raw_bytes is not None else text
        choice = ({"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"} if chat
                  else {"index": 0, "text": content, "finish_reason": "stop"})
        body = {"id": "fault-1", "object": "chat.completion" if chat else "text_completion", "model": req.get("model"),
                "choices": [choice], "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}
        self.send_json(200, json_bytes_with_raw(body, raw_bytes))

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def stream(self, cfg: dict, text, chat: bool, canary: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        mode = "ok" if canary else cfg["mode"]

        def event(piece) -> bytes:
            raw_bytes = piece if isinstance(piece, bytes) else None
            content = "@@RAW@@" if raw_bytes is not None else piece
            choice = ({"index": 0, "delta": {"content": content}, "finish_reason": None} if chat
                      else {"index": 0, "text": content, "finish_reason": None})
            obj = {"id": "fault-1", "object": "chat.completion.chunk", "choices": [choice]}
            return b"data: " + json_bytes_with_raw(obj, raw_bytes) + b"\n\n"

        if chat:
            self.chunk(b'data: {"id":"fault-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n')
        if mode in ("stall", "die"):
            for i in range(int(cfg["events"])):
                self.chunk(event(f"part{i} "))
                time.sleep(0.02)
            if mode == "stall":
                time.sleep(3600)
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
            return
        if isinstance(text, bytes):
            self.chunk(event(text))
        elif mode == "repeat":
            for _ in range(40):
                self.chunk(event(LOOP_UNIT))
        else:
            for word in text.split(" "):
                if word:
                    self.chunk(event(word + " "))
        self.chunk(b'data: {"id":"fault-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
        self.chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class QuietServer(ThreadingHTTPServer):
    def __init__(self, *args, **kw):
        self.live: set[socket.socket] = set()
        self.live_lock = threading.Lock()
        super().__init__(*args, **kw)

    def handle_error(self, request, client_address):  # dropped connections are part of the job
        pass

    def kill(self) -> None:
        """Like a crashed process: stop listening and drop every open connection."""
        self.shutdown()
        self.server_close()
        with self.live_lock:
            for conn in list(self.live):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def serve(port: int, mode: str = "ok", answer: str = "The answer is 4.", canary_answer: str = "4") -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"state": State(mode, answer, canary_answer)})
    server = QuietServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    return server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", default="ok")
    ap.add_argument("--answer", default="The answer is 4.")
    ap.add_argument("--canary-answer", default="4")
    args = ap.parse_args()
    server = serve(args.port, args.mode, args.answer, args.canary_answer)
    print(f"fault upstream on 127.0.0.1:{args.port} mode={args.mode}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
