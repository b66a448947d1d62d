"""Whole real training logs from public repositories (tests/real-logs/*/case.json cites each)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

CASES = sorted(p for p in (Path(__file__).parents[1] / "real-logs").iterdir() if p.is_dir())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_real_log_is_diagnosed_with_its_class_and_decisive_line(case: Path):
    meta = json.loads((case / "case.json").read_text())
    d = diagnose(DiagnoseRequest(target=str(case / "train.log")))
    assert d.primary_cause is not None
    assert d.primary_cause.value in [meta["primary_cause"], *meta.get("acceptable", [])]
    cited = " ".join([d.root_cause.proximate, *(e.text for e in d.evidence)])
    keys = [re.sub(r"^\[rank\d+\]:\s*", "", k.strip())[:60] for k in meta["key_evidence"]]
    assert any(k in cited for k in keys), cited
    assert d.run_status.value == "crashed"
    for f in d.fixes:
        assert f.risk.value in ("safe", "needs-approval", "dangerous") and f.validation


def test_cascade_keeps_the_first_error_not_the_launcher_summary():
    case = next(c for c in CASES if c.name.startswith("061"))
    d = diagnose(DiagnoseRequest(target=str(case / "train.log")))
    assert "save_model() got an unexpected keyword argument" in d.root_cause.proximate
    assert any(r.failure_class.value == "process-crash" and "secondary" in r.reason for r in d.ruled_out)
