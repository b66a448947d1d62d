"""--mlflow-experiment against a real `mlflow server` on loopback (the fixture of tests/collectors/test_mlflow.py):
real PyTorch trainings logged by the real client, their failed and killed runs triaged as a grid."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.collectors.test_mlflow import mlflow_server  # noqa: F401 - the session fixture: one real server
from tests.collectors.training import train

pytestmark = pytest.mark.slow


def _log(client, exp: str, name: str, kind: str, status: str) -> str:  # type: ignore[no-untyped-def]
    from mlflow.entities import Metric

    rid = client.create_run(exp, run_name=name).info.run_id
    series: dict[str, list[Metric]] = {}
    now = int(time.time() * 1000)
    out = io.StringIO()
    train(kind, lambda step, d: [series.setdefault(k, []).append(Metric(k, v, now + step, step)) for k, v in d.items()], out)
    for metrics in series.values():
        client.log_batch(rid, metrics=metrics)
    client.log_text(rid, out.getvalue(), "output.log")
    client.set_terminated(rid, status)
    return rid


def test_failed_and_killed_runs_of_an_experiment_are_triaged_and_grouped(mlflow_server: str, tmp_path: Path) -> None:  # noqa: F811
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server)
    exp = client.create_experiment(f"grid-study-{os.getpid()}-{time.time_ns()}")
    ids = {name: _log(client, exp, name, kind, status) for name, kind, status in (
        ("nan-seed0", "nan", "FAILED"), ("nan-seed1", "nan", "FAILED"), ("nan-seed2", "nan", "FAILED"),
        ("lr-too-high", "diverging", "KILLED"), ("healthy", "healthy", "FINISHED"))}
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_server}
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "triage-runs", "--mlflow-experiment", exp, "--workers", "2",
                           "--out-dir", str(tmp_path), "--format", "json"], check=False, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    runs = {r["name"]: r for r in report["runs"]}
    assert set(runs) == {"nan-seed0", "nan-seed1", "nan-seed2", "lr-too-high"}  # FINISHED runs are not searched
    nan = next(g for g in report["groups"] if "nan-seed0" in g["runs"])
    assert sorted(nan["runs"]) == ["nan-seed0", "nan-seed1", "nan-seed2"] and nan["last_seen"] is not None
    single = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--mlflow", ids["nan-seed1"], "--out-dir",
                             str(tmp_path / "one"), "--format", "json"], check=False, capture_output=True, text=True, env=env, timeout=300)
    d = json.loads(single.stdout)
    assert nan["failure_class"] == d["primary_cause"] == "nan-inf"
    assert runs["lr-too-high"]["fingerprint"] != nan["fingerprint"]

    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "triage-runs", "--mlflow-experiment", exp, "--since", "2999-01-01",
                           "--out-dir", str(tmp_path)], check=False, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "no FAILED or KILLED runs in MLflow experiment" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "triage-runs", "--mlflow-experiment", exp, "--out-dir", str(tmp_path)],
                          check=False, capture_output=True, text=True, env={k: v for k, v in env.items() if k != "MLFLOW_TRACKING_URI"}, timeout=120)
    assert proc.returncode == 2 and "MLFLOW_TRACKING_URI" in proc.stderr and "Traceback" not in proc.stderr
