"""--ray: the same diagnoses as Ray tasks on a real local head the test starts on loopback; the groups must equal the local pool's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.grid.conftest import Grid
from tests.grid.test_real_grid import triage_cli

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """`ray start --head --block` in its own session; stopped (and its process group killed) at the end."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths must stay under 107 characters
    exe = Path(sys.executable).with_name("ray")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}  # the workers inherit PYTHONPATH: they import this checkout's ml_skills
    proc = subprocess.Popen([str(exe), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
                             "--num-cpus", "2", "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", temp],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 180:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, "ray start exited"
            time.sleep(0.5)
        else:
            raise RuntimeError("the Ray head did not listen within 180 s")
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)  # --block: ray stops what it started
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything left of this head's session
        except ProcessLookupError:
            pass
        shutil.rmtree(temp, ignore_errors=True)


def test_ray_tasks_give_the_same_groups_as_the_local_pool(ray_head: str, real_grid: Grid, tmp_path: Path) -> None:
    on_ray = triage_cli(str(real_grid.runs), "--ray", ray_head, "--out-dir", str(tmp_path / "ray"), "--format", "json", cwd=tmp_path, timeout=600)
    assert on_ray.returncode == 0, on_ray.stderr
    local = triage_cli(str(real_grid.runs), "--workers", "2", "--out-dir", str(tmp_path / "local"), "--format", "json", cwd=tmp_path)
    a, b = json.loads(on_ray.stdout), json.loads(local.stdout)
    assert a["backend"] == "ray" and a["workers"] == 2 and b["backend"] == "local"
    key = ["outcome", "fingerprint", "signature", "count", "runs", "example_run", "decisions", "relaunch_blocked"]
    assert [{k: g[k] for k in key} for g in a["groups"]] == [{k: g[k] for k in key} for g in b["groups"]]
    assert a["runs_total"] == 27 and a["counts"] == b["counts"]


def test_an_address_with_no_cluster_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "grid" / "r").mkdir(parents=True)
    (tmp_path / "grid" / "r" / "train.log").write_text("")
    proc = triage_cli(str(tmp_path / "grid"), "--ray", f"127.0.0.1:{_free_port()}", "--out-dir", str(tmp_path), cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("ml-skills: error: cannot join the Ray cluster at") and "Traceback" not in proc.stderr
