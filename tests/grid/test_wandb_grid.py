"""--wandb ENTITY/PROJECT: a W&B project's runs triaged as a grid, through the real wandb client.

The W&B API is a loopback fake at the wire (tests/collectors/wandb_fake.py): the real client
sends its real GraphQL queries (Runs for the project, then Run, history and files for each run);
the runs' histories and console logs come from real PyTorch trainings (tests/collectors/training.py).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.collectors.training import train
from tests.collectors.wandb_fake import FakeRun, FakeWandb

pytestmark = pytest.mark.slow
KEY = "0123456789abcdef0123456789abcdef01234567"


def _run(kind: str, state: str, name: str, created: str, beat: str) -> FakeRun:
    rows: dict[int, dict] = {}
    out = io.StringIO()
    train(kind, lambda step, d: rows.setdefault(step, {"_step": step, "_runtime": step * 0.1}).update(d), out)
    return FakeRun(state, {"optimizer": "sgd", "lr": 0.05}, [rows[k] for k in sorted(rows)], {"output.log": out.getvalue().encode()},
                   display_name=name, created_at=created, heartbeat_at=beat)


@pytest.fixture(scope="module")
def fake():
    with FakeWandb(KEY, entity="lab", project="study") as f:
        for i, (kind, state, name) in enumerate((
            ("nan", "crashed", "nan-seed0"), ("nan", "failed", "nan-seed1"), ("nan", "killed", "nan-seed2"),
            ("diverging", "failed", "lr-too-high"), ("healthy", "finished", "healthy"),
        )):
            f.runs[f"run{i:04d}"] = _run(kind, state, name, f"2026-11-30T1{i}:00:00", f"2026-11-30T1{i}:20:00")
        f.runs["old00001"] = _run("nan", "crashed", "last-week", "2026-11-20T09:00:00", "2026-11-20T09:30:00")
        yield f


@pytest.fixture
def wandb_env(fake):
    fake.faults.clear()
    return {**os.environ, "WANDB_API_KEY": KEY, "WANDB_BASE_URL": fake.url}


def triage(env: dict[str, str], *args: str, out: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ml_skills.cli", "triage-runs", *args, "--out-dir", str(out)], check=False,
                          capture_output=True, text=True, env=env, timeout=timeout)


def test_the_failed_runs_of_a_project_are_triaged_and_grouped_as_check_failed_run_reads_each(wandb_env, tmp_path: Path) -> None:
    proc = triage(wandb_env, "--wandb", "lab/study", "--workers", "2", "--format", "json", out=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    runs = {r["name"]: r for r in report["runs"]}
    assert set(runs) == {"nan-seed0", "nan-seed1", "nan-seed2", "lr-too-high", "last-week"}  # finished runs are not listed
    assert report["targets"] == ["wandb:lab/study"] and report["complete"]
    nan = next(g for g in report["groups"] if "nan-seed0" in g["runs"])
    assert sorted(nan["runs"]) == ["last-week", "nan-seed0", "nan-seed1", "nan-seed2"]
    assert nan["first_seen"].startswith("2026-11-20T09:30") and nan["last_seen"].startswith("2026-11-30T12:20")  # heartbeats
    assert runs["lr-too-high"]["fingerprint"] != nan["fingerprint"]
    assert runs["nan-seed1"]["path"] == "lab/study/run0001"
    single = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--wandb", "lab/study/run0001", "--format", "json",
                             "--out-dir", str(tmp_path / "one")], check=False, capture_output=True, text=True, env=wandb_env, timeout=300)
    d = json.loads(single.stdout)
    assert nan["failure_class"] == d["primary_cause"] == "nan-inf" and runs["nan-seed1"]["decision"] == d["decision"]


def test_states_since_and_the_run_cap_bound_the_listing(wandb_env, tmp_path: Path) -> None:
    proc = triage(wandb_env, "--wandb", "lab/study", "--wandb-states", "finished,crashed", "--since", "2026-11-29", "--workers", "1",
                  "--format", "json", out=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert {r["name"]: r["outcome"] for r in report["runs"]} == {"nan-seed0": "failed", "healthy": "completed"}
    proc = triage(wandb_env, "--wandb", "lab/study", "--max-runs", "2", "--workers", "1", "--format", "json", out=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert sorted(r["name"] for r in report["runs"]) == ["lr-too-high", "nan-seed2"]  # the newest two
    assert not report["complete"] and any("run cap" in n for n in report["notes"])


@pytest.mark.parametrize("args, fault, code, message", [
    (["--wandb", "lab/nope"], None, 2, "no W&B project lab/nope: check ENTITY/PROJECT"),
    (["--wandb", "lab/study"], ("status", 503), 2, "W&B failed on the runs of W&B project lab/study: "),
    (["--wandb", "lab/study", "--since", "2999-01-01"], None, 0, "no failed or crashed or killed runs in W&B project(s) lab/study since then"),
    (["--wandb", "lab"], None, 2, "--wandb expects ENTITY/PROJECT"),
    (["--wandb", "lab/study", "--wandb-states", "broken"], None, 2, "--wandb-states 'broken': give states among"),
])
def test_bad_input_is_one_clear_line(fake, wandb_env, tmp_path: Path, args: list[str], fault, code: int, message: str) -> None:
    if fault is not None:
        fake.faults["Runs"] = [fault] * 20  # every retry of the client's
    proc = triage(wandb_env, *args, out=tmp_path)
    fake.faults.clear()
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    if code == 2:
        assert proc.stderr.startswith("ml-skills: error: ") and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        assert fault is None or "HTTP 503" in proc.stderr  # after the client's bounded retries
    else:
        assert message in proc.stdout and proc.stderr == ""
