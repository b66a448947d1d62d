"""The repeat rule inside one log: torchrun --max-restarts relaunching a real PyTorch job into the same stdout.

torchelastic's agent logs "failed (exitcode: N) local_rank: 0 (pid: P) of binary" each time the
worker group fails, restarts it into the same output and, when it gives up, raises
ChildFailedError. Each job here is tests/grid/torch_cell.py on the CPU under a real `torchrun
--max-restarts=1`, resuming from its newest checkpoint on the restart:

- oom/: one sample too long to fit at step 35, on both attempts;
- kill/: SIGKILLed at step 33, then at step 70 after the restart resumed from step 30;
- preempted/: SIGKILLed at step 33, then the restart finishes.

Each run directory holds the job's config, its checkpoints and train.log (torchrun's whole output).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.conftest import run_cli

pytestmark = pytest.mark.slow
CELL = Path(__file__).with_name("torch_cell.py")
NO_PROGRESS = "relaunching will fail the same way"


def _torchrun(run: Path, **cfg: Any) -> subprocess.Popen[bytes]:
    run.mkdir(parents=True)
    conf = run / "config.json"
    conf.write_text(json.dumps({"run_dir": str(run), "steps": 80, "resume": True, **cfg}))
    torchrun = shutil.which("torchrun") or "torchrun"
    with open(run / "train.log", "wb") as out:
        return subprocess.Popen([sys.executable, torchrun, "--nproc-per-node=1", "--max-restarts=1", "--monitor-interval=0.5",
                                 str(CELL), str(conf)], cwd=run, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("elastic")
    procs = [_torchrun(root / "oom", long_sample_at=35), _torchrun(root / "kill", kill_at=[33, 70]),
             _torchrun(root / "preempted", kill_at=[33, None])]
    codes = [p.wait(timeout=300) for p in procs]
    assert codes == [1, 1, 0], [(root / n / "train.log").read_text()[-2000:] for n in ("oom", "kill", "preempted")]
    return root


def check(log: Path, tmp_path: Path) -> tuple[str, dict]:
    proc = run_cli("check-failed-run", str(log), "--out-dir", str(tmp_path), timeout=240)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout, json.loads((tmp_path / "check-failed-run.json").read_text())


def test_a_deterministic_crash_torchrun_restarted_into_the_same_log_is_no_go(logs: Path, tmp_path: Path) -> None:
    text, d = check(logs / "oom" / "train.log", tmp_path / "log")
    assert d["primary_cause"] == "oom" and d["target_kind"] == "log"
    assert [a["attempt"] for a in d["attempts"]] == [0, 1] and all(a["outcome"] == "failed" for a in d["attempts"])
    assert d["attempts"][0]["fingerprint"] == d["attempts"][1]["fingerprint"]
    assert d["repeat"]["kind"] == "same-failure-no-progress"
    assert d["decision"] == "NO-GO" and d["decision_reason"].startswith(NO_PROGRESS)
    assert "Attempts: 2, oldest first" in text and f"Decision: NO-GO ({NO_PROGRESS}" in text
    # the run directory, whose only log it is: its valid checkpoints would make resuming a plan step, the rule takes it out
    _, d = check(logs / "oom", tmp_path / "dir")
    assert d["target_kind"] == "directory" and d["artifacts"]["newest_valid_checkpoint"]
    assert d["repeat"]["kind"] == "same-failure-no-progress" and d["decision"] == "NO-GO"
    assert "resume-valid-checkpoint" not in [f["fix_id"] for f in d["fixes"]]


def test_a_kill_the_restart_got_past_is_go_and_one_it_finished_after_is_recovered(logs: Path, tmp_path: Path) -> None:
    _, d = check(logs / "kill" / "train.log", tmp_path / "kill")
    assert [(a["attempt"], a["last_step"]) for a in d["attempts"]] == [(0, 30), (1, 70)]
    assert d["repeat"]["kind"] == "same-failure-progressed" and d["decision"] == "GO"
    _, d = check(logs / "preempted" / "train.log", tmp_path / "preempted")
    assert [(a["attempt"], a["outcome"]) for a in d["attempts"]] == [(0, "failed"), (1, "completed")]
    assert d["repeat"]["kind"] == "recovered" and d["run_status"] == "completed"


def test_a_log_of_one_attempt_has_no_attempts(logs: Path, tmp_path: Path) -> None:
    one = tmp_path / "one.log"
    text = (logs / "oom" / "train.log").read_text()
    cut = text.index("failed (exitcode:")
    one.write_text(text[: text.index("\n", cut) + 1])  # the first attempt alone, as if torchrun had no restart left
    d = diagnose(DiagnoseRequest(target=str(one)))
    assert d.attempts == [] and d.repeat is None and d.primary_cause is not None


def test_triage_runs_reads_the_restarts_inside_each_log_the_same_way(logs: Path, tmp_path: Path) -> None:
    proc = run_cli("triage-runs", str(logs), "--workers", "1", "--out-dir", str(tmp_path), timeout=240)  # a directory of run directories
    assert proc.returncode == 0, proc.stderr
    runs = {r["name"]: r for r in json.loads((tmp_path / "triage-runs.json").read_text())["runs"]}
    for name in ("oom", "kill", "preempted"):
        d = diagnose(DiagnoseRequest(target=str(logs / name)))
        assert d.repeat is not None
        assert runs[name]["repeat"]["kind"] == d.repeat.kind.value and runs[name]["decision"] == d.decision.value, name
        assert [a["attempt"] for a in runs[name]["attempts"]] == [0, 1]
