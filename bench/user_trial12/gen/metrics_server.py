"""A tiny local HTTP endpoint that accepts POSTed metrics and PUT checkpoint files (stands in for a tracker).

--fail-posts A-B / --fail-puts A-B: answer the A-th to B-th request of that kind (1-based) with 503,
as an overloaded tracker does for a while.
"""

import argparse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNT = {"POST": 0, "PUT": 0}
FAIL = {}


class H(BaseHTTPRequestHandler):
    def _handle(self) -> None:
        n = int(self.headers.get("Content-Length", 0))
        self.rfile.read(n)
        COUNT[self.command] += 1
        lo, hi = FAIL.get(self.command, (0, -1))
        if lo <= COUNT[self.command] <= hi:
            self.send_error(503, "Service Unavailable", "upstream store is overloaded, retry later")
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    do_POST = _handle
    do_PUT = _handle


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--fail-posts", default="")
    ap.add_argument("--fail-puts", default="")
    a = ap.parse_args()
    for k, v in (("POST", a.fail_posts), ("PUT", a.fail_puts)):
        if v:
            FAIL[k] = tuple(int(x) for x in v.split("-"))
    ThreadingHTTPServer(("127.0.0.1", a.port), H).serve_forever()
