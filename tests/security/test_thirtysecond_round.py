"""Issue 14's thirty-second round: an outside tester's attacks (a helper session that did not write this code). Each test
drives the server over stdio or the CLI in a child process; each failed on the code before its fix (docs/security.md,
"Thirty-second round")."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from tests.mcp.conftest import Server, call_once
from tests.security.childcli import cli

pytestmark = pytest.mark.slow  # real child processes

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
_PLANT = "import os, pathlib\npathlib.Path({marker!r}, str(os.getpid())).write_text('ran')\n"


def _sweep(root: Path) -> Path:
    runs = root / "runs"
    for name, case in (("a", "2070"), ("b", "2119")):
        (runs / name).mkdir(parents=True)
        shutil.copy(next(CORPUS.glob(f"{case}-*")) / "train.log", runs / name / "train.log")
    return runs


def test_modules_planted_in_the_working_folder_never_run_in_the_triage_helpers(tmp_path: Path) -> None:
    """Promise 1: triage_runs starts multiprocessing's forkserver and resource tracker as `python -c ...`, which put the
    working folder (the server's: a run folder) first on their import path; an `org/__init__.py` (pickle probes `org`)
    and a `selectors.py` planted there ran in both, and in every worker forked from the forkserver, under `python -m`,
    the console script and the CLI's triage-runs alike."""
    marks = tmp_path.parent / f"{tmp_path.name}-marks"
    marks.mkdir()
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "__init__.py").write_text(_PLANT.format(marker=str(marks)))
    (tmp_path / "selectors.py").write_text(_PLANT.format(marker=str(marks)) + "raise ImportError('planted')\n")
    runs = _sweep(tmp_path)
    err, body, _ = call_once(Server(tmp_path, roots=[tmp_path]), "triage_runs", {"targets": [str(runs)], "workers": 2})
    assert not err and "oom" in body, body
    got = cli("triage-runs", str(runs), "--workers", "2", cwd=tmp_path, timeout=180)
    assert got.returncode in (0, 1), got.stderr[-600:]
    assert sorted(p.name for p in marks.iterdir()) == []


def _pointer_through_a_link(run: Path) -> tuple[Path, Path]:
    st = pytest.importorskip("safetensors.torch")
    torch = pytest.importorskip("torch")
    (run / "meta").mkdir(parents=True)
    for step in (50, 100):
        st.save_file({"w": torch.ones(2) * step}, str(run / f"model-{step:03d}.safetensors"))
    (run / "meta" / "latest").write_text("model-100.safetensors\n")
    (run / "latest").symlink_to(Path("meta") / "latest")
    return run / "latest", run / "model-050.safetensors"


def test_a_pointer_that_is_a_link_is_refused_never_rolled_back_unasked(tmp_path: Path) -> None:
    """Promise 2: `run/latest -> meta/latest` holding 'model-100.safetensors' (every reader joins it to run/) was judged
    from meta/, read 'missing', and a repoint to model-050 ran as a safe action, asked of no one."""
    pointer, older = _pointer_through_a_link(tmp_path / "run")
    before = (tmp_path / "run" / "meta" / "latest").read_text()
    _err, body, _ = call_once(Server(tmp_path, roots=[tmp_path]), "request_action", {"action": {
        "kind": "repoint-checkpoint", "pointer_file": str(pointer), "checkpoint": str(older)}})
    assert (tmp_path / "run" / "meta" / "latest").read_text() == before, body
    assert pointer.is_symlink() and '"ran":true' not in body.replace(" ", ""), body
    assert "symbolic link" in body, body


class _Listener(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        type(self).hits.append(self.headers.get("Authorization", ""))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_wandb_settings_file_in_the_working_folder_never_chooses_where_the_key_goes(tmp_path: Path) -> None:
    """Promise 3: wandb reads `wandb/settings` under the working folder as it sets itself up; the server's is a run
    folder, so a planted `base_url = http://127.0.0.1:PORT` sent get_wandb_run's requests, with the API key in their
    Authorization header, to that host."""
    pytest.importorskip("wandb")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        for folder in ("wandb", ".wandb"):
            _Listener.hits.clear()
            shutil.rmtree(tmp_path / "wandb", ignore_errors=True)
            shutil.rmtree(tmp_path / ".wandb", ignore_errors=True)
            (tmp_path / folder).mkdir()
            (tmp_path / folder / "settings").write_text(f"[default]\nbase_url = http://127.0.0.1:{srv.server_address[1]}\n")
            env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
            env.update(WANDB_API_KEY="0123456789abcdef0123456789abcdef01234567", ML_SKILLS_TRACKER_TIMEOUT="5",
                       HOME=str(tmp_path / "home"))
            saved = dict(os.environ)
            os.environ.clear()
            os.environ.update(env)
            try:
                _err, body, _ = call_once(Server(tmp_path, roots=[tmp_path]), "get_wandb_run", {"run": "acme/proj/abc123"})
            finally:
                os.environ.clear()
                os.environ.update(saved)
            assert _Listener.hits == [], (folder, body)
    finally:
        srv.shutdown()
    assert json.dumps(body)  # the call answered (an error: no W&B host is reachable here)
