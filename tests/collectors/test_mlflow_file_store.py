"""`--mlflow RUN_ID` on a file store (MLFLOW_TRACKING_URI=file:///.../mlruns, or the folder's path): read as the plain
files it is, the way a run directory's own mlruns/ is read. The thirteenth user trial's MLflow case: MLflow 3's client
refuses the file store unless MLFLOW_ALLOW_FILE_STORE is set ('in maintenance mode'), so `--mlflow` ended in that
error while the same store, handed over as a folder, was diagnosed.

A real run logged by the real MLflow client into a real file store (the writer allowed to, as an older MLflow or a team's
setting would); the diagnosis runs with the variable unset, and the store is unchanged by it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

mlflow = pytest.importorskip("mlflow")

WRITER = """
import math, mlflow, sys
mlflow.set_tracking_uri(sys.argv[1])
with mlflow.start_run(run_name="expdecay") as run:
    lr = 0.05
    for step in range(120):
        lr = lr * 1.04 if step > 40 else lr  # the decay factor inverted: the rate climbs after warmup
        loss = 0.1 + (0.0 if step <= 40 else math.exp((step - 40) / 9.0) * 0.01)
        mlflow.log_metric("lr", lr, step=step)
        mlflow.log_metric("train_loss", loss, step=step)
    print(run.info.run_id)
"""


def _store(tmp_path: Path) -> tuple[Path, str]:
    store = tmp_path / "mlruns"
    env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"}
    out = subprocess.run([sys.executable, "-c", WRITER, store.as_uri()], capture_output=True, text=True, env=env,
                         timeout=300, check=True)
    return store, out.stdout.strip().splitlines()[-1]


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _diagnose(tmp_path: Path, uri: str, run_id: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_ALLOW_FILE_STORE"}
    env["MLFLOW_TRACKING_URI"] = uri
    return subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--mlflow", run_id, "--out-dir",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=300, check=False)


def test_a_file_store_run_is_diagnosed_by_its_id_and_left_as_it_was(tmp_path: Path) -> None:
    store, run_id = _store(tmp_path)
    before = _files(store)
    for uri in (store.as_uri(), str(store)):
        done = _diagnose(tmp_path, uri, run_id)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Primary cause: optimization-divergence" in done.stdout, done.stdout[:2000]
        assert "History: 120 steps" in done.stdout
    assert _files(store) == before  # reading created, changed or migrated nothing


def test_an_id_that_is_no_run_of_the_store_is_named_as_such(tmp_path: Path) -> None:
    store, _ = _store(tmp_path)
    done = _diagnose(tmp_path, store.as_uri(), "0123456789abcdef")
    assert done.returncode == 2, done.stderr
    assert "no MLflow run 0123456789abcdef" in done.stderr and "Traceback" not in done.stderr
