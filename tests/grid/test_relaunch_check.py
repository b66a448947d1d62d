"""check-failed-run on a run directory of several attempts: the repeat rule triage-runs applies, on real relaunched jobs.

Each run is a real PyTorch job on the CPU (tests/grid/torch_cell.py) launched under bash as a
launcher does, then relaunched from its newest checkpoint:

- oom/: one sample too long to fit, at step 35, on every launch (train.log, then train.retry1.log);
- kill/: SIGKILLed at step 33, relaunched, SIGKILLed again at step 70, after getting further
  (attempt-1/, attempt-2/);
- preempted/: SIGKILLed at step 33, relaunched, finishes (train.log, then attempt-1/).

The checkpoints are the run directory's, shared by its attempts, as a resuming job keeps them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.slow
CELL = Path(__file__).with_name("torch_cell.py")
SCHEMA = json.loads((ROOT / "schemas" / "check-failed-run.schema.json").read_text())
NO_PROGRESS = "relaunching will fail the same way"


@dataclass
class Relaunched:
    root: Path
    oom: Path
    kill: Path
    preempted: Path


def _launch(run: Path, log: Path, **cfg: Any) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    conf = log.with_suffix(".json")
    conf.write_text(json.dumps({"run_dir": str(run), "steps": 80, "resume": True, **cfg}))
    with open(log, "wb") as out:
        # `; exit $?` keeps bash as the parent, so a SIGKILLed child is reported ("... Killed python ...") as a launcher does
        return subprocess.Popen(["bash", "-c", f'"{sys.executable}" "{CELL}" "{conf}"; exit $?'], stdout=out, stderr=subprocess.STDOUT)


def _wait(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.wait(timeout=240)


@pytest.fixture(scope="module")
def relaunched(tmp_path_factory: pytest.TempPathFactory) -> Relaunched:
    root = tmp_path_factory.mktemp("relaunched")
    r = Relaunched(root=root, oom=root / "oom", kill=root / "kill", preempted=root / "preempted")
    _wait([_launch(r.oom, r.oom / "train.log", long_sample_at=35),
           _launch(r.kill, r.kill / "attempt-1" / "train.log", kill_at=33),
           _launch(r.preempted, r.preempted / "train.log", kill_at=33)])
    _wait([_launch(r.oom, r.oom / "train.retry1.log", long_sample_at=35),
           _launch(r.kill, r.kill / "attempt-2" / "train.log", kill_at=70),
           _launch(r.preempted, r.preempted / "attempt-1" / "train.log")])
    return r


def check(target: Path, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / target.name
    proc = run_cli("check-failed-run", str(target), *extra, "--out-dir", str(out), timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    report = json.loads((out / "check-failed-run.json").read_text())
    jsonschema.validate(report, SCHEMA)
    return proc, report


def test_a_relaunched_deterministic_crash_is_no_go_and_offers_no_relaunch(relaunched: Relaunched, tmp_path: Path) -> None:
    proc, d = check(relaunched.oom, tmp_path)
    assert d["primary_cause"] == "oom"
    assert [(a["attempt"], a["outcome"], Path(a["path"]).name) for a in d["attempts"]] == [(0, "failed", "train.log"), (1, "failed", "train.retry1.log")]
    assert d["attempts"][0]["fingerprint"] == d["attempts"][1]["fingerprint"]
    assert d["repeat"]["kind"] == "same-failure-no-progress" and d["repeat"]["previous_step"] == 30
    assert d["decision"] == "NO-GO" and d["decision_reason"].startswith(NO_PROGRESS)
    assert "resume-valid-checkpoint" not in [f["fix_id"] for f in d["fixes"]]
    assert [f["rank"] for f in d["fixes"]] == list(range(1, len(d["fixes"]) + 1))
    assert not any("Resume from the newest checkpoint" in c for c in d["next_commands"] + [x["title"] for x in d["findings"]])
    text = proc.stdout
    assert "Attempts: 2, oldest first: attempt 0 failed at step 30" in text
    assert f"Relaunch (same-failure-no-progress): {NO_PROGRESS}" in text and f"Decision: NO-GO ({NO_PROGRESS}" in text


def test_without_its_first_attempt_the_same_log_would_be_resumed(relaunched: Relaunched, tmp_path: Path) -> None:
    """The rule is what removes the relaunch: the newest attempt alone, with the run's checkpoints, offers it."""
    _, d = check(relaunched.oom / "train.retry1.log", tmp_path, "--artifacts", str(relaunched.oom))
    assert d["primary_cause"] == "oom" and d["repeat"] is None and d["attempts"] == []
    assert "resume-valid-checkpoint" in [f["fix_id"] for f in d["fixes"]]
    assert not d["decision_reason"].startswith(NO_PROGRESS)


def test_a_transient_kill_that_got_further_when_relaunched_is_go(relaunched: Relaunched, tmp_path: Path) -> None:
    proc, d = check(relaunched.kill, tmp_path)
    assert [(a["attempt"], a["last_step"]) for a in d["attempts"]] == [(1, 30), (2, 70)]
    assert d["repeat"]["kind"] == "same-failure-progressed"
    assert d["decision"] == "GO" and "a transient fault" in d["decision_reason"]
    assert "resume-valid-checkpoint" in [f["fix_id"] for f in d["fixes"]]  # resuming is the recovery here
    assert d["target"] == str(relaunched.kill) and d["target_kind"] == "directory"
    assert "Relaunch (same-failure-progressed)" in proc.stdout


def test_a_kill_whose_relaunch_finished_is_read_as_recovered(relaunched: Relaunched, tmp_path: Path) -> None:
    _, d = check(relaunched.preempted, tmp_path)
    assert [(a["attempt"], a["outcome"]) for a in d["attempts"]] == [(0, "failed"), (1, "completed")]
    assert d["repeat"]["kind"] == "recovered" and d["run_status"] == "completed" and d["decision"] == "GO"


def test_triage_runs_reads_the_same_attempts_the_same_way(relaunched: Relaunched, tmp_path: Path) -> None:
    """One rule for both commands: the grid's verdict on each relaunched run is check-failed-run's."""
    proc = run_cli("triage-runs", str(relaunched.root), "--workers", "1", "--out-dir", str(tmp_path), timeout=240)
    assert proc.returncode == 0, proc.stderr
    runs = {r["name"]: r for r in json.loads((tmp_path / "triage-runs.json").read_text())["runs"]}
    for run in (relaunched.oom, relaunched.kill, relaunched.preempted):
        d = diagnose(DiagnoseRequest(target=str(run)))
        assert d.repeat is not None
        assert runs[run.name]["repeat"]["kind"] == d.repeat.kind.value, run.name
        assert runs[run.name]["decision"] == d.decision.value, run.name
        assert [a["attempt"] for a in runs[run.name]["attempts"]] == [a.attempt for a in d.attempts]
