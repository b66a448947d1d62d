"""A run that fails on its experiment tracker's server is the platform's failure, not a config error (issue 13).

A real MLflow client (the installed mlflow) pointed at a loopback port nobody listens on raises MlflowException
over a MaxRetryError naming '/api/2.0/mlflow/runs/create'. Real logs from public reports: corpus 976 (an MLflow
tracking server answering 500 to log-batch) and 1101 (ClearML's Task.init timing out on api.clear.ml 240 times
before its LoginError). A model download that fails the same way (a network fetch) stays a config error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]

RUN = textwrap.dedent("""
    import socket, mlflow
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mlflow.set_tracking_uri(f"http://127.0.0.1:{port}")
    print("epoch 1 loss 0.5123", flush=True)
    with mlflow.start_run():
        mlflow.log_metric("loss", 0.5123)
""")


def test_an_mlflow_server_nobody_answers(tmp_path):
    pytest.importorskip("mlflow")
    env = {**os.environ, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "3"}
    out = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert out.returncode != 0 and "/api/2.0/mlflow/" in out.stderr
    log = tmp_path / "train.log"
    log.write_text(out.stdout + out.stderr)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "pipeline-orchestration"
    assert d.fixes and d.fixes[0].fix_id == "tracker-reachable-or-offline"


@pytest.mark.parametrize("case", ["976", "1101"])
def test_tracker_failures_in_public_reports(case):
    log = next((TESTS / "corpus").glob(f"{case}-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "pipeline-orchestration"
