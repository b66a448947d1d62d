"""The bundled example is a real run: re-run it and diagnose the fresh log."""

from __future__ import annotations

import subprocess
import sys

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from .conftest import ROOT


def test_nan_example_reruns_and_is_diagnosed(tmp_path):
    log = tmp_path / "train.log"
    with open(log, "w") as f:
        proc = subprocess.run([sys.executable, str(ROOT / "examples/nan-loss/train.py")], stdout=f, stderr=subprocess.STDOUT, timeout=300, check=False)
    assert proc.returncode == 1  # the run really fails
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause.value == "nan-inf"
    assert d.run_status.value == "crashed"  # the NaN guard raised FloatingPointError: exit code 1
    assert d.anomalies and d.anomalies[0].kind.value == "nan-onset" and "first 100 steps" in d.anomalies[0].detail
    assert "FloatingPointError" in d.root_cause.proximate
    assert d.fixes[0].fix_id == "lower-lr-add-warmup" and d.fixes[0].risk.value == "needs-approval"
    assert d.decision.value == "NO-GO"
    committed = diagnose(DiagnoseRequest(target=str(ROOT / "examples/nan-loss/train.log")))
    assert committed.primary_cause == d.primary_cause
