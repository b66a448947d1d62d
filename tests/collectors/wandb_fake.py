"""A loopback fake of the W&B GraphQL API, answering the queries the real wandb client sends.

The operations were captured from wandb 0.31's public API (through wandb-core): Viewer,
GetDefaultEntity, Run (RunFragment), RunHistoryKeys, RunParquetHistory (answered with no
parquet files, so the client falls back to HistoryPage), HistoryPage (rows as JSON strings,
paged by step range) and RunFiles (cursor-paged); file contents are served at the URL given
in RunFiles. Runs (a project's runs, `Api().runs`) is answered with the lightweight fragment the
client asks for, filtered the way the server filters (the MongoDB-style operators of the
`filters` JSON on state, createdAt, name and displayName), ordered by created_at and
cursor-paged; an unknown project is a null project, as the server answers it. `faults[op]` holds faults consumed one per request of that operation:
("status", code, headers), ("body", bytes) or ("drip", seconds): the real answer sent one byte per
interval, each byte well inside the client's per-read timeout.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.fakes.wire import send_body


@dataclass
class FakeRun:
    state: str
    config: dict[str, Any]
    rows: list[dict[str, Any]]  # one dict per step, with _step
    files: dict[str, bytes] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    display_name: str | None = None  # default: "<id>-display"
    created_at: str = "2026-11-29T10:00:00"
    heartbeat_at: str = "2026-11-29T10:20:00"


class FakeWandb:
    def __init__(self, api_key: str, entity: str = "team", project: str = "proj"):
        self.api_key, self.entity, self.project = api_key, entity, project
        self.runs: dict[str, FakeRun] = {}
        self.faults: dict[str, list[tuple[Any, ...]]] = {}
        self.ops: list[tuple[str, dict[str, Any]]] = []
        self.times: list[tuple[str, float]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _send(
                self, status: int, body: bytes, headers: dict[str, str] | None = None, ctype: str = "application/json",
                drip: float = 0.0,
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                send_body(self, body, drip)

            def _authorised(self) -> bool:
                want = "Basic " + base64.b64encode(f"api:{fake.api_key}".encode()).decode()
                return self.headers.get("Authorization") == want

            def do_GET(self) -> None:
                m = re.match(r"^/files/([\w-]+)/(.+)$", self.path)
                if not m or m[1] not in fake.runs or m[2] not in fake.runs[m[1]].files:
                    return self._send(404, b"not found", ctype="text/plain")
                data = fake.runs[m[1]].files[m[2]]
                rng = re.match(r"bytes=-(\d+)$", self.headers.get("Range", ""))
                if rng and int(rng[1]) < len(data):
                    start = len(data) - int(rng[1])
                    return self._send(
                        206, data[start:], {"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"}, "text/plain"
                    )
                self._send(200, data, ctype="text/plain")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.path.startswith("/graphql"):
                    return self._send(200, b"")  # wandb-core's own telemetry
                req = json.loads(body or b"{}")
                op = _operation(req.get("query", ""))
                fake.ops.append((op, req.get("variables") or {}))
                fake.times.append((op, time.monotonic()))
                faults = fake.faults.get(op) or fake.faults.get("*")
                drip = 0.0
                if faults and faults[0][0] == "drip":
                    drip = faults.pop(0)[1]
                elif faults:
                    f = faults.pop(0)
                    if f[0] == "body":
                        return self._send(200, f[1])
                    err = json.dumps({"errors": [{"message": f"injected HTTP {f[1]}"}]}).encode()
                    return self._send(f[1], err, f[2] if len(f) > 2 else None)
                if not self._authorised():
                    return self._send(401, json.dumps({"errors": [{"message": "user is not logged in"}]}).encode())
                self._send(
                    200, json.dumps({"data": fake.answer(op, req.get("variables") or {}, self.headers.get("Host", ""))}).encode(),
                    drip=drip,
                )

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

    def answer(self, op: str, v: dict[str, Any], host: str) -> Any:
        viewer = {
            "id": "VXNlcjox",
            "entity": self.entity,
            "username": "alice",
            "email": None,
            "flags": "{}",
            "teams": {"edges": []},
        }
        if op in ("Viewer", "GetDefaultEntity"):
            return {"viewer": viewer}
        if op == "Runs":
            return self._runs(v)
        name = v.get("name") or v.get("runName") or v.get("run")
        run = self.runs.get(name) if v.get("project") == self.project and v.get("entity") == self.entity else None
        if run is None:
            return {"project": {"run": None, "internalId": "1"}}
        last = max((r["_step"] for r in run.rows), default=-1)
        keys = sorted({k for r in run.rows for k in r})
        if op == "Run":
            summary = {k: v for r in run.rows for k, v in r.items()}
            return {
                "project": {
                    "run": {
                        "projectId": "1",
                        "id": base64.b64encode(f"Run:{name}".encode()).decode(),
                        "tags": [],
                        "name": name,
                        "displayName": run.display_name or f"{name}-display",
                        "sweepName": None,
                        "state": run.state,
                        "config": json.dumps({k: {"value": x, "desc": None} for k, x in run.config.items()}),
                        "group": None,
                        "jobType": None,
                        "commit": None,
                        "readOnly": False,
                        "createdAt": run.created_at,
                        "heartbeatAt": run.heartbeat_at,
                        "description": None,
                        "notes": None,
                        "systemMetrics": json.dumps(run.system),
                        "summaryMetrics": json.dumps(summary),
                        "historyLineCount": len(run.rows),
                        "user": {"name": "alice", "username": "alice"},
                        "historyKeys": {
                            "lastStep": last,
                            "keys": {k: {"typeCounts": [{"type": "number", "count": 1}]} for k in keys},
                        },
                    }
                }
            }
        if op == "RunHistoryKeys":
            return {"project": {"run": {"historyKeys": {"lastStep": last, "keys": {}}}}}
        if op == "RunParquetHistory":
            return {"project": {"run": {"parquetHistory": {"parquetUrls": [], "liveData": []}}}}
        if op == "HistoryPage":
            lo, hi, n = int(v["minStep"]), int(v["maxStep"]), int(v["pageSize"])
            rows = [r for r in run.rows if lo <= r["_step"] < hi][:n]
            return {"project": {"run": {"history": [json.dumps(r, allow_nan=True) for r in rows]}}}
        if op == "RunFiles":
            names = sorted(run.files)
            start = int(v.get("fileCursor") or 0)
            limit = int(v.get("fileLimit") or 50)
            page = names[start : start + limit]
            edges = [
                {
                    "node": {
                        "id": f"F{i}",
                        "name": n,
                        "url": f"http://{host}/files/{name}/{n}",
                        "directUrl": f"http://{host}/files/{name}/{n}",
                        "sizeBytes": len(run.files[n]),
                        "mimetype": "text/plain",
                        "updatedAt": "2026-11-29T10:20:00",
                        "md5": "",
                    },
                    "cursor": str(start + i + 1),
                }
                for i, n in enumerate(page)
            ]
            more = start + limit < len(names)
            return {
                "project": {
                    "internalId": "1",
                    "run": {
                        "fileCount": len(names),
                        "files": {"edges": edges, "pageInfo": {"endCursor": str(start + len(page)), "hasNextPage": more}},
                    },
                }
            }
        raise AssertionError(f"the fake does not know operation {op}")


    def _runs(self, v: dict[str, Any]) -> Any:
        if v.get("project") != self.project or v.get("entity") != self.entity:
            return {"project": None}
        flt = json.loads(v.get("filters") or "{}")
        found = [(n, r) for n, r in self.runs.items() if _matches(flt, _fields(n, r))]
        order = v.get("order") or "+created_at"
        assert order.lstrip("+-") == "created_at", f"the fake orders by created_at only, not {order}"
        found.sort(key=lambda x: _when(x[1].created_at), reverse=order.startswith("-"))
        start, size = int(v.get("cursor") or 0), int(v.get("perPage") or 50)
        page = found[start : start + size]
        edges = [{"node": {"projectId": "1", "id": base64.b64encode(f"Run:{n}".encode()).decode(), "tags": [], "name": n,
                           "displayName": r.display_name or f"{n}-display", "sweepName": None, "state": r.state, "group": None,
                           "jobType": None, "commit": None, "readOnly": False, "createdAt": r.created_at, "heartbeatAt": r.heartbeat_at,
                           "description": None, "notes": None, "historyLineCount": len(r.rows), "user": {"name": "alice", "username": "alice"}},
                  "cursor": str(start + i + 1)} for i, (n, r) in enumerate(page)]
        return {"project": {"internalId": "1", "runCount": len(found), "readOnly": False,
                            "runs": {"edges": edges, "pageInfo": {"endCursor": str(start + len(page)), "hasNextPage": start + size < len(found)}}}}


def _fields(name: str, run: FakeRun) -> dict[str, Any]:
    return {"name": name, "displayName": run.display_name or f"{name}-display", "state": run.state, "createdAt": run.created_at}


def _when(text: str) -> datetime:
    t = datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _matches(flt: dict[str, Any], row: dict[str, Any]) -> bool:
    """The operators of W&B's run filters (MongoDB's) this fake answers; any other is a test error, not a silent match."""
    for key, want in flt.items():
        if key == "$and":
            ok = all(_matches(f, row) for f in want)
        elif key == "$or":
            ok = any(_matches(f, row) for f in want)
        else:
            assert key in row, f"the fake filters on {sorted(row)}, not {key}"
            have = _when(row[key]) if key == "createdAt" else row[key]
            conds = want if isinstance(want, dict) else {"$eq": want}
            ok = all(_compare(op, have, _when(x) if key == "createdAt" and isinstance(x, str) else x) for op, x in conds.items())
        if not ok:
            return False
    return True


def _compare(op: str, have: Any, x: Any) -> bool:
    match op:
        case "$eq":
            return have == x
        case "$ne":
            return have != x
        case "$in":
            return have in x
        case "$nin":
            return have not in x
        case "$gte":
            return have >= x
        case "$gt":
            return have > x
        case "$lte":
            return have <= x
        case "$lt":
            return have < x
    raise AssertionError(f"the fake does not know filter operator {op}")


def _operation(query: str) -> str:
    m = re.search(r"\bquery\s+(\w+)", query)
    return m[1] if m else "?"
