"""The engine's OpenAI-compatible server, on a REAL local port (127.0.0.1).

The recipe's port (e.g. 30000 on spark1) maps to a free local port:
`SimWorld.http_endpoint(node, port)` gives its URL. Tokens stream at the
seed's measured rate in simulated time (so `speed` times faster in real time).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_tui.sim.engine import Engine
    from spark_tui.sim.world import SimWorld

WORDS = ("def", " fib", "(n", "):", "\n", "   ", " a", ",", " b", " =", " 0", ",", " 1", "\n")


class EngineServer:
    """One engine's HTTP server."""

    def __init__(self, world: SimWorld, engine: Engine) -> None:
        self.world = world
        self.engine = engine
        # not the world's lock: a curl on the node holds that one while it waits for us
        self.lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"server_ref": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name=f"sim-http-{self.port}", daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str | None:
        """The local URL while the engine listens (after its startup line, until it dies)."""
        e = self.engine
        now = self.world.clock.now()
        if e.serving_from is None or now < e.serving_from or not e.alive(now):
            return None
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve(world: SimWorld, engine: Engine) -> None:
    key = (engine.node.name, engine.spec.port)
    old = world.servers.pop(key, None)
    if old is not None:
        old.close()
    server = EngineServer(world, engine)
    engine.local_port = server.port
    world.servers[key] = server


class _Handler(BaseHTTPRequestHandler):
    server_ref: EngineServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    # -- helpers --

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing to tell it

    def _json(self, status: int, obj: object) -> None:
        self._send(status, json.dumps(obj).encode())

    def _ready(self) -> bool:
        e = self.server_ref.engine
        now = self.server_ref.world.clock.now()
        return e.serving_from is not None and now >= e.serving_from and e.alive(now)

    @property
    def _model_name(self) -> str:
        e = self.server_ref.engine
        return str(e.spec.arg("--served-model-name", default=e.spec.model))

    def _log(self, method: str, status: str) -> None:
        e = self.server_ref.engine
        e.log_line_request(self.server_ref.world.clock.now(), method, self.path, status)

    # -- routes --

    def do_GET(self) -> None:
        e = self.server_ref.engine
        if not self._ready():
            self._json(503, {"error": "engine not ready"})
            return
        if self.path.startswith("/health"):
            self._send(200, b"")
        elif self.path.startswith("/v1/models"):
            self._log("GET", "200 OK")
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self._model_name,
                            "object": "model",
                            "created": int(e.start),
                            "owned_by": e.spec.kind,
                            "root": e.spec.model,
                            "max_model_len": int(
                                e.spec.num("--max-model-len", "--context-length", default=131072)
                            ),
                        }
                    ],
                },
            )
        elif self.path.startswith("/metrics"):
            name = self._model_name
            now = self.server_ref.world.clock.now()
            body = (
                "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                "# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="{name}"}} {float(e.running_at(now))}\n'
                "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
                "# TYPE vllm:generation_tokens_total counter\n"
                f'vllm:generation_tokens_total{{model_name="{name}"}} {float(int(e.tokens_at(now)))}\n'
            )
            self._send(200, body.encode(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self.path.startswith(("/v1/chat/completions", "/v1/completions")):
            self._json(404, {"detail": "Not Found"})
            return
        if not self._ready():
            self._json(503, {"error": "engine not ready"})
            return
        try:
            req = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._json(
                400,
                {
                    "object": "error",
                    "message": "invalid JSON",
                    "type": "BadRequestError",
                    "code": 400,
                },
            )
            return
        world = self.server_ref.world
        e = self.server_ref.engine
        with self.server_ref.lock:
            why = e.begin_request(world.clock.now())
        if why == "wedged":
            # the request hangs until the compiled DAG times out and the engine dies
            while e.alive(world.clock.now()):
                if not world.clock.speed:  # a stepped clock: waiting is what passes the time
                    world.clock.advance(1.0)
                else:
                    time.sleep(0.01)
            self._log("POST", "500 Internal Server Error")
            self._json(
                500,
                {
                    "object": "error",
                    "message": "EngineCore encountered an issue.",
                    "type": "InternalServerError",
                    "code": 500,
                },
            )
            return
        if why is not None:
            self._log("POST", "500 Internal Server Error")
            self._json(
                500, {"object": "error", "message": why, "type": "InternalServerError", "code": 500}
            )
            return
        max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 64)
        n = max(1, min(max_tokens, 2048))
        stream = bool(req.get("stream"))
        created = int(world.clock.now())
        rid = f"chatcmpl-sim{e.requests_total:06d}"
        ended = False

        def end() -> None:
            """The request leaves the engine's running count before its last byte goes out
            (a client that reads /metrics right after the answer sees it finished)."""
            nonlocal ended
            if not ended:
                ended = True
                e.end_request()

        try:
            if stream:
                self._stream(e, n, rid, created, end)
            else:
                text = self._generate(e, n, None)
                end()
                self._log("POST", "200 OK")
                self._json(
                    200,
                    {
                        "id": rid,
                        "object": "chat.completion",
                        "created": created,
                        "model": self._model_name,
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "length",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": 24,
                            "completion_tokens": n,
                            "total_tokens": 24 + n,
                        },
                    },
                )
        finally:
            end()

    def _generate(self, e: Engine, n: int, on_token: object) -> str:
        """Produce n tokens at the engine's rate in simulated time."""
        clock = self.server_ref.world.clock
        out: list[str] = []
        if not clock.speed:
            # a stepped clock: generating is what makes simulated time pass
            for i in range(n):
                clock.advance(1.0 / e.tok_s)
                out.append(WORDS[i % len(WORDS)])
                e.add_tokens(1)
                if on_token is not None:
                    on_token(out[-1])  # type: ignore[operator]  # a callable when set (checked above)
            return "".join(out)
        start = clock.now()
        while len(out) < n:
            # every token due by now (simulated time) goes out at once: the rate holds
            # whatever the real-time overhead of writing each chunk
            due = min(n, int((clock.now() - start) * e.tok_s))
            if due <= len(out):
                wait = (len(out) + 1) / e.tok_s - (clock.now() - start)
                time.sleep(min(0.01, max(0.0002, wait / max(clock.speed, 1e-6))))
                continue
            for i in range(len(out), due):
                tok = WORDS[i % len(WORDS)]
                out.append(tok)
                e.add_tokens(1)
                if on_token is not None:
                    on_token(tok)  # type: ignore[operator]  # a callable when set (checked above)
        return "".join(out)

    def _stream(self, e: Engine, n: int, rid: str, created: int, end: Callable[[], None]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        model = self._model_name

        def chunk(data: str) -> None:
            payload = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()

        def on_token(tok: str) -> None:
            chunk(
                json.dumps(
                    {
                        "id": rid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [{"index": 0, "delta": {"content": tok}, "finish_reason": None}],
                    }
                )
            )

        self._generate(e, n, on_token)
        end()
        chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self._log("POST", "200 OK")
