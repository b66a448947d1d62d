"""Several jobs' outputs appended to one file, each closed by its scheduler report (issue 13, items 1 and 5).

Real logs: corpus 560 (TheDingodile/ML_health, a committed LSF report: the first job dies at once on CUDA OOM at batch
16, the resubmission at batch 12 runs 3 h 40 min and ends with logging errors, '/bin/rm: write error: No space left on
device' and the owner's kill), 559 (one job of the same study, its OOM the only attempt). The terminal event is the
last attempt's; an earlier attempt's failure is history the run went on past.
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.classify import last_attempt_start
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.scan import scan_log

TESTS = Path(__file__).resolve().parents[1]


def _case(prefix: str) -> Path:
    return next((TESTS / "corpus").glob(f"{prefix}-*")) / "train.log"


def test_the_last_attempt_starts_after_the_first_jobs_report_corpus_560():
    log = _case("560")
    start = last_attempt_start(scan_log(log))
    lines = log.read_text(encoding="utf-8").splitlines()
    assert start is not None and lines[start - 2].startswith("Exited with exit code 1.")
    assert start < next(i for i, x in enumerate(lines, 1) if "No space left on device" in x)


def test_the_last_attempts_ending_decides_and_the_first_attempts_oom_is_history_corpus_560():
    d = diagnose(DiagnoseRequest(target=str(_case("560"))))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint", d.root_cause
    assert "No space left on device" in d.root_cause.proximate
    assert "oom" in {r.failure_class.value for r in d.ruled_out}


def test_one_job_report_is_one_attempt_corpus_559():
    log = _case("559")
    assert last_attempt_start(scan_log(log)) is None
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "oom"
