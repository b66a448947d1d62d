"""Numerics, run for real: NaN early (lr), NaN late (one corrupt record), divergence without NaN."""

from __future__ import annotations

import pytest

from .harness import run
from .report_checks import check, expect, line_of

pytestmark = pytest.mark.slow  # real training runs in child processes


# the same loop goes NaN early or late; the heuristics and the first fix differ:
# (how it fails, args, the first NaN line, what the onset says, top fix, its risk, its validation)
NAN = [
    pytest.param("SGD at lr 0.5 with no warmup: loss inf within 5 steps, the loop's finiteness check stops it.",
                 ["--lr", "0.5"], "| loss inf", "within the first 100 steps",
                 "lower-lr-add-warmup", "needs-approval", "next 200 steps", id="early-lr"),
    pytest.param("399 stable steps, then a batch holding one record with an inf feature: NaN at step 400.",
                 ["--bad-record-step", "400"], "step 400 | loss nan", "after 399 stable steps with no warning rise",
                 "find-bad-batch", "safe", "replayed batch", id="late-bad-batch"),
]


@pytest.mark.parametrize("how, args, nan_line, onset, fix, risk, validation", NAN)
def test_nan_early_points_to_lr_and_late_to_the_bad_batch(tmp_path, how, args, nan_line, onset, fix, risk, validation):
    lab = run("regress", tmp_path / "run", *args)
    assert lab.returncode == 1
    r = check(lab.log, tmp_path / "out", how=how)
    expect(r, cls="nan-inf", status="crashed", log=lab.log, line_text="FloatingPointError: Loss became infinite or NaN",
           fix_id=fix, risk=risk, validation=validation, decision="NO-GO")
    assert r.data["fixes"][0]["fix_id"] == fix
    nan = next(a for a in r.data["anomalies"] if a["kind"] == "nan-onset")
    assert nan["line_no"] == line_of(lab.log, nan_line) and onset in nan["detail"]
    assert len(r.data["anomalies"]) == 1  # nothing else competes (no grad spike from the initial phase)
    # the same run from its directory (log + config.json + command.txt) says the same
    d = check(lab.run_dir, tmp_path / "out-dir", how=how)
    assert d.data["primary_cause"] == "nan-inf" and d.data["fixes"][0]["fix_id"] == fix


def test_loss_blowup_without_nan_is_divergence(tmp_path):
    """Adam at lr 3.0 with no warmup: loss jumps from 2.3 to thousands and stays there; no NaN, exit 0."""
    lab = run("classify", tmp_path / "run", "--lr", "3.0", "--warmup-steps", "0", "--steps", "200")
    assert lab.returncode == 0  # nothing crashes: the run just stops learning
    r = check(lab.log, tmp_path / "out")
    blowup = next(a for a in r.data["anomalies"] if a["kind"] == "loss-blowup")
    step = int(blowup["step"])
    expect(r, cls="optimization-divergence", status="diverged", log=lab.log, line_text=f"] step {step} | loss",
           fix_id="lower-lr-add-warmup", risk="needs-approval", validation="next 200 steps", decision="NO-GO")
    assert r.data["fixes"][0]["fix_id"] == "lower-lr-add-warmup"
    assert "divergence without NaN" in blowup["detail"]
    assert not any(a["kind"] == "nan-onset" for a in r.data["anomalies"])
    losses = [float(l.split("| loss ")[1].split()[0]) for l in lab.log.read_text().splitlines() if "| loss " in l]
    assert max(losses) > 100 * losses[0] and losses[-1] > 10 * losses[0]  # the log really shows the blow-up
