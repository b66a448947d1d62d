"""A NaN run that W&B or MLflow still shows running and that goes on saving: the plan stops it first, through the tracker.

The run is real (procs/nan_saves.py: a PyTorch CPU job whose learning rate jumps to 5.0, the loss overflows
to inf and NaN, and it saves every 10 steps); it is killed once it has saved after the NaN. What it logged
is served by the loopback W&B API fake (tests/collectors/wandb_fake.py, the wire the real wandb client
talks to): each printed step as a history row, its console as output.log, its state as W&B reports it.
With state 'running' the plan's first fix stops it before its next save (no pid to pause: there is no
command, the person stops it where it runs); the same run reported 'crashed' gets no such fix. The same
run logged through the real MLflow SDK into a local store (metrics per step, the console as output.log) and
left RUNNING, as a live job leaves it, gets the same first fix; once terminated FAILED it gets none.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.collectors.wandb_fake import FakeRun, FakeWandb

JOB = Path(__file__).parent / "procs" / "nan_saves.py"
KEY = "0123456789abcdef0123456789abcdef01234567"
pytestmark = pytest.mark.slow


def _saves(text: str) -> list[tuple[int, str]]:
    return [(int(m.group(2)), m.group(1)) for m in re.finditer(r"^Saving checkpoint to (\S+step_(\d+)\.pt)$", text, re.MULTILINE)]


def _first_bad(text: str) -> int:
    return next(int(m.group(1)) for m in re.finditer(r"^step (\d+) \| loss (\S+)", text, re.MULTILINE) if m.group(2) in ("inf", "nan"))


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The console of the real job, cut when it has saved once after its loss went NaN."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("nanjob")
    log = out / "train.log"
    with open(log, "wb") as f:
        p = subprocess.Popen([sys.executable, "-u", str(JOB), str(out)], stdout=f, stderr=subprocess.STDOUT, cwd=out,
                             env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end and p.poll() is None:
            text = log.read_text()
            if "loss nan" in text and any(step > _first_bad(text) for step, _ in _saves(text)):
                break
            time.sleep(0.1)
    finally:
        p.kill()
        p.wait()
    text = log.read_text()
    assert "loss nan" in text and _saves(text), text[-2000:]
    return text


@pytest.fixture(scope="module")
def fake(logged: str):
    rows = _rows(logged)
    with FakeWandb(KEY) as f:
        for name, state in (("live01", "running"), ("dead01", "crashed")):
            f.runs[name] = FakeRun(state, {"lr": 0.01, "save_every": 10}, rows, {"output.log": logged.encode()})
        yield f


def _rows(logged: str) -> list[dict]:
    return [{"_step": int(m.group(1)), "_runtime": int(m.group(1)) * 0.02, "loss": float(m.group(2)), "lr": float(m.group(3))}
            for m in re.finditer(r"^step (\d+) \| loss (\S+) \| lr (\S+)$", logged, re.MULTILINE)]


def _diagnose(fake: FakeWandb, run: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    monkeypatch.setenv("WANDB_BASE_URL", fake.url)
    return diagnose(DiagnoseRequest(wandb=f"team/proj/{run}"))


def test_a_running_wandb_nan_run_that_keeps_saving_is_stopped_first(fake, logged: str, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _diagnose(fake, "live01", monkeypatch)
    first = d.fixes[0]
    assert first.fix_id == "stop-before-next-save", [f.fix_id for f in d.fixes]
    assert first.risk.value == "needs-approval"
    assert first.command is None  # W&B names no process to pause
    assert "wandb run team/proj/live01 (running) is still running" in first.because, first.because
    bad = _first_bad(logged)
    good = [(s, p) for s, p in _saves(logged) if s < bad]
    assert good and f"last good checkpoint is {good[-1][1]}" in first.because, first.because
    nxt = re.search(r"saves every (\d+) steps, next at step (\d+)", first.because)
    assert nxt and nxt.group(1) == "10" and int(nxt.group(2)) == _saves(logged)[-1][0] + 10, first.because
    assert re.search(r"\d+ save\(s\) since the NaN already", first.because), first.because
    assert len(d.fixes) >= 2  # the fixes for the NaN itself follow


def test_the_same_wandb_run_reported_crashed_gets_no_stop(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _diagnose(fake, "dead01", monkeypatch)
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    assert d.fixes and "stop-before-next-save" not in [f.fix_id for f in d.fixes]


def _check_stop_first(d, logged: str, where: str) -> None:
    first = d.fixes[0]
    assert first.fix_id == "stop-before-next-save", [f.fix_id for f in d.fixes]
    assert first.command is None and f"{where} is still running" in first.because, first.because
    good = [(s, p) for s, p in _saves(logged) if s < _first_bad(logged)]
    assert f"last good checkpoint is {good[-1][1]}" in first.because, first.because
    assert f"next at step {_saves(logged)[-1][0] + 10}" in first.because, first.because


def test_a_running_mlflow_nan_run_that_keeps_saving_is_stopped_first(logged: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/local.db"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("nanjob", artifact_location=str(tmp_path / "art"))
    rid = client.create_run(exp).info.run_id
    now = int(time.time() * 1000)
    rows = _rows(logged)
    for key in ("loss", "lr"):
        client.log_batch(rid, metrics=[Metric(key, r[key], now + r["_step"], r["_step"]) for r in rows])
    client.log_text(rid, logged, "output.log")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    d = diagnose(DiagnoseRequest(mlflow=rid))
    _check_stop_first(d, logged, f"mlflow run {rid} (RUNNING)")
    client.set_terminated(rid, "FAILED")
    d = diagnose(DiagnoseRequest(mlflow=rid))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    assert "stop-before-next-save" not in [f.fix_id for f in d.fixes]
