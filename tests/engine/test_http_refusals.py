"""An HTTP 403 or 401 that `requests` raises (the client of the Hugging Face Hub, W&B, most REST APIs) ends a
run on a refused permission or a missing credential, not on a code bug.

A real training script pushes its model to a real HTTP server on loopback after a few steps, as a push-to-hub
callback does, and the server refuses it; requests' raise_for_status() writes '403 Client Error: Forbidden for
url: ...' (or 401 Unauthorized), the line a user pastes from a Lightning or Trainer run.
"""

from __future__ import annotations

import http.server
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("requests")

SCRIPT = """
    import sys
    import requests
    for step in range(1, 4):
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
    # the push-to-hub callback at the end of the epoch
    requests.post(sys.argv[1] + "/api/models/some-org/invoices-model/commit/main", json={"files": []}).raise_for_status()
"""


class _Refuse(http.server.BaseHTTPRequestHandler):
    code = 403

    def do_POST(self) -> None:
        self.send_response(self.server.code)  # type: ignore[attr-defined]
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=[403, 401])
def server(request) -> Iterator[tuple[str, int]]:
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Refuse)
    srv.code = request.param  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", request.param
    srv.shutdown()


def test_a_refused_push_is_a_permission_or_credential_failure(tmp_path, server):
    url, code = server
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py", url], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                       timeout=120, check=False)
    text = log.read_text()
    assert f"{code} Client Error" in text, text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "cloud-permissions-quota", (d.primary_cause, text)
    assert "Client Error" in d.root_cause.proximate
