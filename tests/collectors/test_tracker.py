"""What both tracker collectors share: lazy SDK imports, rows by step, named caps."""

from __future__ import annotations

import subprocess
import sys

from ml_skills.collectors import tracker


def test_collector_modules_leave_the_sdks_unimported():
    code = (
        "import sys, ml_skills.collectors.mlflow, ml_skills.collectors.wandb, ml_skills.engine.pipeline; "
        "print(sorted(m for m in ('mlflow', 'wandb') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_rows_merge_by_step_with_canonical_names_and_keep_nan():
    run = tracker.TrackerRun(kind="wandb", name="e/p/r")
    run.add("train/loss", 3, 1.5)
    run.add("learning_rate", 3, 0.1)
    run.add("eval_loss", 3, "NaN")
    run.add("system.gpu.0.memoryAllocatedBytes", 0, 2e9)
    run.add("system.gpu.0.memoryAllocatedBytes", 0, 3e9)
    run.add("note", 3, "text")
    src = tracker.to_evidence(run).source
    (p,) = src.metrics
    assert p.step == 3 and p.values["loss"] == 1.5 and p.values["lr"] == 0.1 and p.values["val_loss"] != p.values["val_loss"]
    assert src.facts["peak system.gpu.0.memoryAllocatedBytes"] == "3e+09"


def test_a_cap_that_bites_is_named(monkeypatch):
    monkeypatch.setattr(tracker, "MAX_ROWS", 10)
    run = tracker.TrackerRun(kind="mlflow", name="abc")
    for s in range(25):
        run.add("loss", s, 1.0)
    src = tracker.to_evidence(run).source
    assert len(src.metrics) == 10 and src.status == "partial"
    assert any("15 later steps were not kept" in m for m in src.missing)


def test_a_long_history_is_sampled_with_the_nan_step_kept_and_said(monkeypatch):
    monkeypatch.setattr(tracker, "MAX_POINTS", 100)
    run = tracker.TrackerRun(kind="mlflow", name="abc")
    for s in range(1000):
        run.add("loss", s, float("nan") if s == 777 else 1.0)
    src = tracker.to_evidence(run).source
    assert 100 <= len(src.metrics) <= 102
    assert any(p.step == 777 for p in src.metrics) and src.metrics[-1].step == 999
    assert "Analysed an even sample of" in "\n".join(src.report_lines)
