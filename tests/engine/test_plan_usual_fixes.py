"""When no evidence names a fix, the class's usual fixes are offered as such, but not one that needs evidence the
log does not hold: a dtype mismatch inside the run's own loss (corpus 858, verbatim) was told first to give the job
its experiment tracker's credentials (the user trial of 2026-12-02 overruled it). A run whose tracker did fail still
gets that fix (corpus 270-285 hold wandb's 'api_key not configured')."""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _fixes(prefix: str) -> list[str]:
    d = diagnose(DiagnoseRequest(target=str(next(CORPUS.glob(f"{prefix}-*")) / "train.log")))
    return [f.fix_id for f in d.fixes]


def test_a_tracker_fix_is_not_offered_without_a_tracker_in_the_evidence() -> None:
    fixes = _fixes("858")
    assert fixes and "configure-experiment-tracker" not in fixes


def test_a_tracker_that_failed_still_gets_its_fix() -> None:
    hits = [p.parent.name for p in sorted(CORPUS.glob("*/train.log")) if "api_key not configured" in p.read_text(errors="replace")]
    assert hits
    assert "configure-experiment-tracker" in _fixes(hits[0][:3])
