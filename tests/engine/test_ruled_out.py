"""Ruled out, with reasons: a competing class loses for a reason that cites its own line and the line that beats it.

Real corpus logs where more than one class has signals (tests/corpus/*/case.json cites each thread), and a
real PyTorch run (procs/skip_then_nan.py) that logs a data error, skips the batch, trains on and dies of an
overflowing loss. The line numbers are found in the log by the text of the line, not written down, so the
test checks what the report says against the log itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.models import FailureClass

CORPUS = Path(__file__).parents[1] / "corpus"


def _case(prefix: str) -> Path:
    return next(p for p in CORPUS.iterdir() if p.name.startswith(prefix)) / "train.log"


def _line(log: Path, text: str) -> int:
    return next(i for i, line in enumerate(log.read_text(errors="replace").splitlines(), start=1) if text in line)


# case, the competitor, a text of its line, a text of the line that beats it, the signature named on that line
COMPETITORS = [
    # a rank's CUDA OOM, then another rank's NCCL watchdog: the watchdog fired after the OOM
    ("071-", FailureClass.NCCL_DISTRIBUTED, "Watchdog caught collective operation timeout", "CUDA out of memory", "cuda-oom"),
    # NCCL's 'connection closed by remote peer' printed first, the proxy's out-of-memory later: the first only reports a failure
    ("121-", FailureClass.NCCL_DISTRIBUTED, "socketProgress: Connection closed by remote peer", "Cuda failure 'out of memory'", "cuda-oom"),
    # the launcher's SIGTERM to the other ranks after rank 11's OOM: a warning-level line, not the failure
    ("180-", FailureClass.NCCL_DISTRIBUTED, "closing signal SIGTERM", "CUDA out of memory", "cuda-oom"),
    # (475's 'no checkpoint found' at start-up, a segfault four lines later, was here: since 738cc1e that print is no
    # signal at all, every such corpus line being one the run went past; tests/engine/test_ninetysecond_batch_readings.py)
]


@pytest.mark.parametrize(("prefix", "competitor", "its_line", "beaten_by", "label"), COMPETITORS, ids=[c[0] for c in COMPETITORS])
def test_a_competitor_loses_for_a_reason_that_cites_its_line_and_the_line_that_beats_it(
        prefix: str, competitor: FailureClass, its_line: str, beaten_by: str, label: str) -> None:
    log = _case(prefix)
    d = diagnose(DiagnoseRequest(target=str(log)))
    reason = next(r.reason for r in d.ruled_out if r.failure_class is competitor)
    mine, theirs = _line(log, its_line), _line(log, beaten_by)
    assert mine != theirs
    assert f"at line {mine}" in reason and f"{label} at line {theirs}" in reason, reason
    assert "signatures matched" not in reason and "scores" not in reason


def test_a_class_with_no_signal_is_ruled_out_by_what_its_failure_would_be_not_a_count() -> None:
    log = _case("071-")
    d = diagnose(DiagnoseRequest(target=str(log)))
    silent = [r for r in d.ruled_out if r.reason.startswith("no evidence")]
    assert silent, d.ruled_out
    for r in silent:
        assert "its failure would be" in r.reason and "signatures matched" not in r.reason
        assert "no signal of its own" in r.reason


def test_every_competitor_reason_in_the_corpus_names_a_line() -> None:
    """No reason is a bare score or count: each names the competitor's line or what it would take."""
    named = 0
    for case in sorted(p for p in CORPUS.iterdir() if (p / "train.log").is_file())[::5]:
        d = diagnose(DiagnoseRequest(target=str(case / "train.log")))
        for r in d.ruled_out:
            if d.primary_cause is None:
                continue
            assert "signatures matched" not in r.reason
            assert "at line" in r.reason or "its failure would be" in r.reason, (case.name, r)
            named += 1
    assert named > 50


@pytest.mark.slow
def test_a_data_error_the_run_went_on_past_is_ruled_out_by_the_progress_after_it(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "-u", str(Path(__file__).parent / "procs" / "skip_then_nan.py"), str(tmp_path)], stdout=out,
                       stderr=subprocess.STDOUT, cwd=tmp_path, timeout=180, check=False,
                       env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    lines = log.read_text().splitlines()
    assert "FloatingPointError: Loss is" in lines[-1], lines[-5:]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is FailureClass.NAN_INF
    reason = next(r.reason for r in d.ruled_out if r.failure_class is FailureClass.DATA_PIPELINE)
    missing = _line(log, "No such file or directory")
    went_on = next(i for i, x in enumerate(lines, start=1) if i > missing and x.startswith("step ") and "| loss" in x)
    assert f"at line {missing} came before later training progress (lines {went_on}-" in reason, reason
