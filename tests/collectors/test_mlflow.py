"""`--mlflow RUN` against a real `mlflow server` (sqlite backend, proxied artifacts) on loopback.

Runs are logged by the real mlflow client from real PyTorch trainings (training.py); faults
are injected by a loopback proxy in front of the same server (faultproxy.py).
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from ml_skills.collectors import http_api
from ml_skills.collectors import mlflow as mlflow_collector
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.errors import SourceTimeout, SourceUnavailable

from .conftest import check_failed_run
from .faultproxy import FaultProxy
from .training import train

BIG = 25_000 + 700  # one page of metric history is 25,000 points


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    with open(root / "server.log", "wb") as server_log:  # the child holds its own copy of the descriptor
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlflow",
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
                "--backend-store-uri",
                f"sqlite:///{root}/mlflow.db",
                "--artifacts-destination",
                str(root / "artifacts"),
            ],
            cwd=root,
            # the server's job runner (a dozen huey worker processes) is not under test and eats the shared cores
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
            stdout=server_log,
            stderr=subprocess.STDOUT,
        )
    try:
        while time.monotonic() - t0 < 240:  # a cold start (imports, sqlite migrations) is slow on a busy machine
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("mlflow server exited: " + (root / "server.log").read_text()[-2000:])
                time.sleep(0.25)
        else:
            raise RuntimeError("mlflow server did not become healthy in 240s")
        print(f"mlflow server healthy after {time.monotonic() - t0:.1f}s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def runs(mlflow_server, tmp_path_factory):
    """Log the real runs once: healthy, diverging, nan (each metric in its own call), and a big one."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server)
    t0 = time.monotonic()
    exp = client.create_experiment("ml-skills-tests")
    ids = {}
    for kind in ("healthy", "diverging", "nan", "precursor"):
        run = client.create_run(exp, run_name=kind)
        rid = run.info.run_id
        client.log_param(rid, "optimizer", "sgd")
        client.log_param(rid, "batch_size", "16")
        ended = _log_training(client, rid, kind)
        client.set_terminated(rid, "FINISHED" if ended == "finished" else "FAILED")
        ids[kind] = rid
        print(f"logged {kind} at {time.monotonic() - t0:.1f}s")
    run = client.create_run(exp, run_name="big")
    rid = run.info.run_id
    now = int(time.time() * 1000)
    for start in range(0, BIG, 1000):
        batch = [Metric("loss", 2.0 / (1 + s / 1000), now, s) for s in range(start, min(BIG, start + 1000))]
        client.log_batch(rid, metrics=batch)
    client.set_terminated(rid, "FINISHED")
    ids["big"] = rid
    print(f"logged big at {time.monotonic() - t0:.1f}s")
    return ids


def _log_training(client, rid: str, kind: str) -> str:
    """Train, then log each metric's series in its own call (as buffered loggers flush) and stdout."""
    from mlflow.entities import Metric

    series: dict[str, list[Metric]] = {}
    now = int(time.time() * 1000)
    out = io.StringIO()
    ended = train(
        kind, lambda step, d: [series.setdefault(k, []).append(Metric(k, v, now + step, step)) for k, v in d.items()], out
    )
    for metrics in series.values():
        client.log_batch(rid, metrics=metrics)
    client.log_text(rid, out.getvalue(), "output.log")
    return ended


def _cli(
    run_id: str, uri: str, tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    return check_failed_run("--mlflow", run_id, *extra, out=tmp_path / "out", env={"MLFLOW_TRACKING_URI": uri, **(env or {})})


@pytest.mark.parametrize(
    "kind, cause, status",
    [("diverging", "optimization-divergence", "diverged"), ("nan", "nan-inf", "crashed"), ("healthy", None, "completed"),
     ("precursor", "nan-inf", "crashed")],
)
def test_cli_diagnoses_real_runs_on_a_real_server(runs, mlflow_server, tmp_path, kind, cause, status):
    proc, report = _cli(runs[kind], mlflow_server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert report["target_kind"] == "mlflow"
    assert report["primary_cause"] == cause
    assert report["run_status"] == status
    assert f"Run: mlflow {runs[kind]}" in proc.stdout
    names = {s["name"] for s in report["trajectory"]}
    assert {"loss", "grad_norm", "lr", "throughput", "val_loss"} <= names
    if kind == "precursor":  # the same history as from its log: the grad-norm jump cited with its numbers
        assert any("grad_norm" in e["text"] and "-> " in e["text"] and "at step 60, 1 step before the first NaN" in e["text"]
                   for e in report["evidence"]), report["evidence"]


def test_metrics_logged_in_separate_calls_line_up_by_step(runs, mlflow_server, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    raw = mlflow_collector.collect(DiagnoseRequest(mlflow=runs["nan"]))
    src, logs = raw.source, raw.logs
    by_step = {p.step: p.values for p in src.metrics}
    assert set(by_step[9]) == {"loss", "grad_norm", "lr", "throughput", "val_loss"}
    first_nan = min(s for s, v in by_step.items() if v["loss"] != v["loss"])
    assert by_step[first_nan]["grad_norm"] != by_step[first_nan]["grad_norm"]  # NaN on the same step
    assert src.state == "FAILED" and src.facts["config optimizer"] == "sgd"
    assert "output.log" in src.details["artifacts"]
    assert logs and logs[0].source.endswith("/output.log")
    assert any("RuntimeError: loss is nan" in line for line in (logs[0].text or "").splitlines())


def test_a_run_with_artifacts_in_folders_is_read_folder_by_folder(mlflow_server, monkeypatch):
    """The seventieth round: any run with an artifact in a folder (a plot under plots/, a log under logs/) made the whole
    collection fail with a TypeError, the listing's `path` parameter colliding with the request helper's own; no
    evidence came back. A log in a folder is read as one at the top is."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server)
    exp = client.get_experiment_by_name("ml-skills-folders") or client.get_experiment(client.create_experiment("ml-skills-folders"))
    rid = client.create_run(exp.experiment_id, run_name="folders").info.run_id
    out = io.StringIO()
    ended = train("nan", lambda step, d: None, out)
    client.log_text(rid, out.getvalue(), "logs/train.log")
    client.log_text(rid, "loss curve\n", "plots/deep/curve.txt")
    client.set_terminated(rid, "FAILED" if ended != "finished" else "FINISHED")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    raw = mlflow_collector.collect(DiagnoseRequest(mlflow=rid))
    assert {"logs/train.log", "plots/deep/curve.txt"} <= set(raw.source.details["artifacts"]), raw.source.details
    assert raw.logs and raw.logs[0].source.endswith("logs/train.log")
    assert any("RuntimeError: loss is nan" in line for line in (raw.logs[0].text or "").splitlines())


def test_every_page_of_history_is_read(runs, mlflow_server, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    src = mlflow_collector.collect(DiagnoseRequest(mlflow=runs["big"])).source
    assert len(src.metrics) == BIG
    assert src.metrics[-1].step == BIG - 1 and not src.missing


def test_local_sqlite_store_is_read_through_the_sdk(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/local.db"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("local", artifact_location=str(tmp_path / "art"))
    rid = client.create_run(exp).info.run_id
    _log_training(client, rid, "nan")
    client.set_terminated(rid, "FAILED")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    d = diagnose(DiagnoseRequest(mlflow=rid))
    assert d.primary_cause == "nan-inf"
    assert any(s.name == "val_loss" for s in d.trajectory)


def test_server_down_is_one_line_connection_refused(tmp_path):
    port = _free_port()
    proc, report = _cli("0123abcd", f"http://127.0.0.1:{port}", tmp_path)
    assert proc.returncode == 2 and report is None
    assert "connection refused" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_unknown_run_is_404_not_found(mlflow_server, tmp_path):
    proc, _ = _cli("ffffffffffffffffffffffffffffffff", mlflow_server, tmp_path)
    assert proc.returncode == 2
    assert "no run ffffffffffffffffffffffffffffffff" in proc.stderr and "404" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_run_id_and_missing_uri_are_refused(tmp_path):
    proc, _ = _cli("../../etc", "http://127.0.0.1:9", tmp_path)
    assert proc.returncode == 2 and "run id" in proc.stderr
    proc, _ = _cli("abc", "", tmp_path)
    assert proc.returncode == 2 and "MLFLOW_TRACKING_URI" in proc.stderr


def test_503_and_429_are_retried_honouring_retry_after(runs, mlflow_server, monkeypatch):
    with FaultProxy(mlflow_server) as proxy:
        proxy.rules["/api/2.0/mlflow/runs/get"] = [("status", 503, {"Retry-After": "0"}), ("status", 429, {"Retry-After": "1"})]
        monkeypatch.setenv("MLFLOW_TRACKING_URI", proxy.url)
        t0 = time.monotonic()
        src = mlflow_collector.collect(DiagnoseRequest(mlflow=runs["diverging"])).source
        assert time.monotonic() - t0 >= 1.0  # waited as Retry-After said
        assert sum(p.startswith("/api/2.0/mlflow/runs/get") for p in proxy.seen) == 3
        assert src.status == "ok" and src.metrics


def test_persistent_5xx_on_history_gives_partial_evidence_naming_what_is_missing(runs, mlflow_server, tmp_path, monkeypatch):
    rule = "/api/2.0/mlflow/metrics/get-history?run_id=" + runs["diverging"] + "&metric_key=grad_norm"
    with FaultProxy(mlflow_server) as proxy:
        proxy.rules[rule] = [("status", 500, {"Retry-After": "0"})] * 4
        proc, report = _cli(runs["diverging"], proxy.url, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert report["primary_cause"] == "optimization-divergence"
    assert "Missing: history of grad_norm: the MLflow server failed on history of grad_norm: HTTP 500" in proc.stdout
    # the tracker's own series lacks grad_norm (the run's output.log still has it, and is read)
    with FaultProxy(mlflow_server) as proxy:
        proxy.rules[rule] = [("status", 500, {"Retry-After": "0"})] * 4
        monkeypatch.setenv("MLFLOW_TRACKING_URI", proxy.url)
        src = mlflow_collector.collect(DiagnoseRequest(mlflow=runs["diverging"])).source
    assert src.status == "partial" and src.metrics
    assert not any("grad_norm" in m.values for m in src.metrics)
    assert any("loss" in m.values for m in src.metrics)


def test_malformed_answer_and_hang_are_one_line_errors(runs, mlflow_server, monkeypatch):
    with FaultProxy(mlflow_server) as proxy:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", proxy.url)
        proxy.rules["/api/2.0/mlflow/runs/get"] = [("body", 200, b"<html>gateway</html>")]
        with pytest.raises(SourceUnavailable, match="malformed answer"):
            mlflow_collector.collect(DiagnoseRequest(mlflow=runs["healthy"]))
        proxy.rules["/api/2.0/mlflow/runs/get"] = [("hang", 4)]
        monkeypatch.setenv("ML_SKILLS_TRACKER_TIMEOUT", "2")
        t0 = time.monotonic()
        with pytest.raises(SourceTimeout, match="did not answer"):
            mlflow_collector.collect(DiagnoseRequest(mlflow=runs["healthy"]))
        assert time.monotonic() - t0 < 3.5


def test_a_connection_reset_is_retried_a_bounded_number_of_times(runs, mlflow_server, monkeypatch):
    with FaultProxy(mlflow_server) as proxy:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", proxy.url)
        proxy.rules["/api/2.0/mlflow/runs/get"] = [("reset",)]
        src = mlflow_collector.collect(DiagnoseRequest(mlflow=runs["healthy"])).source
        assert sum(p.startswith("/api/2.0/mlflow/runs/get") for p in proxy.seen) == 2 and src.metrics
        proxy.rules["/api/2.0/mlflow/runs/get"] = [("reset",)] * 10
        with pytest.raises(SourceUnavailable, match="the MLflow server"):
            mlflow_collector.collect(DiagnoseRequest(mlflow=runs["healthy"]))
        assert sum(p.startswith("/api/2.0/mlflow/runs/get") for p in proxy.seen) == 2 + 1 + http_api.RETRIES


def test_a_slow_drip_is_cut_at_the_deadline(runs, mlflow_server, monkeypatch):
    """Each byte comes well inside the per-read timeout, so only the collector's total deadline ends the call
    (the whole answer, one byte per 0.1 s, would take minutes)."""
    with FaultProxy(mlflow_server) as proxy:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", proxy.url)
        monkeypatch.setenv("ML_SKILLS_TRACKER_TIMEOUT", "2")
        proxy.rules["/api/2.0/mlflow/runs/get"] = [("drip", 0.1)]
        t0 = time.monotonic()
        with pytest.raises(SourceTimeout, match="2s deadline"):
            mlflow_collector.collect(DiagnoseRequest(mlflow=runs["healthy"]))
        assert time.monotonic() - t0 < 30  # far below the drip's own length: the deadline ended it


def test_secrets_in_params_tags_and_logs_never_reach_the_output(mlflow_server, tmp_path):
    """Fresh fake secrets of every kind logged as params, a tag and a log artifact, by the real client."""
    from mlflow.tracking import MlflowClient

    from tests.security.fakes import Planted
    from tests.security.figures import record

    p = Planted()
    client = MlflowClient(tracking_uri=mlflow_server)
    exp = client.get_experiment_by_name("ml-skills-leaky") or client.get_experiment(client.create_experiment("ml-skills-leaky"))
    rid = client.create_run(exp.experiment_id, run_name="leaky").info.run_id
    params = {k.replace("-", "_"): v for k, v in p.values.items()} | {"hf_token": p.values["hf"], "wandb_api_key": p.values["wandb-hex"]}
    for k, v in params.items():
        client.log_param(rid, k, v)
    client.set_tag(rid, "launch_command", f"torchrun train.py --api-key {p.values['cli-api-key']} --password {p.values['cli-password']}")
    client.set_terminated(rid, "FAILED" if _log_training(client, rid, "nan") != "finished" else "FINISHED")
    logged = "\n".join(p.log_lines()) + "\n"
    client.log_text(rid, logged, "launcher.log")  # a second log artifact, as a launcher's own log
    proc, report = _cli(rid, mlflow_server, tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert report is not None and report["primary_cause"] == "nan-inf"
    assert p.leaks(proc.stdout + proc.stderr + json.dumps(report)) == []
    assert report["redactions"] > 0
    planted = sum(t.count(x) for x in p.all_secrets() for t in (json.dumps(params), logged)) + 2
    record("secret instances planted", "MLflow params, a tag and a log artifact (real client)", planted)
    record("channels checked, no secret found", "CLI on an MLflow run: stdout, stderr, report", 3)


def test_credentials_in_the_uri_never_reach_the_output(runs, mlflow_server, tmp_path):
    secret_uri = mlflow_server.replace("http://", "http://alice:hunter2secret@")
    proc, report = _cli(runs["healthy"], secret_uri, tmp_path, env={"MLFLOW_TRACKING_TOKEN": "tok_abcdefghijklmnop1234"})
    assert proc.returncode == 0, proc.stderr
    blob = proc.stdout + proc.stderr + json.dumps(report)
    assert "hunter2secret" not in blob and "tok_abcdefghijklmnop1234" not in blob
    proc, _ = _cli(runs["healthy"], secret_uri.replace(mlflow_server.rsplit(":", 1)[1], str(_free_port())), tmp_path)
    assert proc.returncode == 2 and "hunter2secret" not in proc.stderr
