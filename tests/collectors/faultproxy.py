"""A loopback HTTP proxy in front of a real server that injects faults on chosen paths.

`rules` maps a path prefix to a list of faults consumed one per matching request
(("status", 503, {"Retry-After": "0"}), ("body", 200, b"not json"), ("hang", seconds), ("reset",): a TCP reset, ("drip", seconds):
the real answer sent one byte per interval, each byte well inside a client's per-read timeout);
when a path's list is empty, requests pass through to the real server unchanged.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.fakes.wire import reset, send_body


class FaultProxy:
    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.rules: dict[str, list[tuple[Any, ...]]] = {}
        self.seen: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def _handle(self) -> None:
                proxy.seen.append(self.path)
                drip = 0.0
                for prefix, faults in proxy.rules.items():
                    if self.path.startswith(prefix) and faults:
                        fault = faults.pop(0)
                        if fault[0] == "drip":
                            drip = fault[1]
                            break
                        if fault[0] == "reset":  # a TCP reset instead of an answer
                            reset(self)
                            return
                        if fault[0] == "hang":
                            time.sleep(fault[1])
                            return
                        status, extra = fault[1], fault[2] if len(fault) > 2 else {}
                        body = fault[2] if fault[0] == "body" else b'{"error_code": "INTERNAL_ERROR", "message": "injected"}'
                        self.send_response(status)
                        for k, v in extra.items() if isinstance(extra, dict) else []:
                            self.send_header(k, v)
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                        return
                n = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(n) if n else None
                req = urllib.request.Request(
                    proxy.upstream + self.path,
                    data=data,
                    method=self.command,
                    headers={k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")},
                )
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        status, headers, body = r.status, r.headers, r.read()
                except urllib.error.HTTPError as e:
                    status, headers, body = e.code, e.headers, e.read()
                self.send_response(status)
                for k, v in headers.items():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                send_body(self, body, drip)

            do_GET = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
