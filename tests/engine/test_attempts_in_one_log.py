"""Several jobs' outputs appended to one file, each closed by its scheduler report (issue 13, items 1 and 5).

Real logs: corpus 451 (two submissions of a PaiNN job, each failing on a different unexpected keyword argument), 560 (TheDingodile/ML_health, a committed LSF report: the first job dies at once on CUDA OOM at batch
16, the resubmission at batch 12 runs 3 h 40 min and ends with logging errors, '/bin/rm: write error: No space left on
device' and the owner's kill), 559 (one job of the same study, its OOM the only attempt). The terminal event is the
last attempt's; an earlier attempt's failure is history the run went on past.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.collectors.attempts import log_attempts
from ml_skills.engine.classify.terminal import last_attempt_start
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.read.scan import scan_log

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


@pytest.mark.parametrize(("case", "first_lines"), [("451", (1, 78)), ("560", (1, 135))])
def test_each_job_report_closes_an_attempt_for_the_repeat_rule(case, first_lines):
    """The attempts the repeat rule compares: the line after each report's verdict starts the next job's output."""
    found = log_attempts(str(_case(case)))
    assert found is not None and tuple(first for _, first, _ in found) == first_lines
    assert "Exited with exit code 1." in found[0][2].splitlines()[-1]


@pytest.mark.parametrize("case", ["451", "560"])
def test_two_jobs_failing_differently_are_compared_and_not_called_a_repeat(case):
    d = diagnose(DiagnoseRequest(target=str(_case(case))))
    assert d.repeat is not None and d.repeat.kind.value == "different-failure", d.repeat
    assert len(d.attempts) == 2


def test_one_job_report_has_no_attempts_to_compare_corpus_559():
    assert log_attempts(str(_case("559"))) is None
