"""What the batch-reading tests share: a case of tests/corpus (or tests/healthy) by its number, and the engine's
verdict on a log as (primary cause, run status), the pair those tests compare."""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def case(n: str, kind: str = "corpus") -> Path:
    """The train.log of the case numbered `n` in tests/<kind>."""
    return next((TESTS / kind).glob(f"{n}-*")) / "train.log"


def verdict(log: Path) -> tuple[str | None, str]:
    """The class of the primary cause (None for none) and the run status the engine gives `log`."""
    d = diagnose(DiagnoseRequest(target=str(log)))
    return (d.primary_cause.value if d.primary_cause else None), d.run_status.value
