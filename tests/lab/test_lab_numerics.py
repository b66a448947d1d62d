"""Numerics, run for real: NaN early (lr), NaN late (one corrupt record), divergence without NaN."""

from __future__ import annotations

from .harness import run
from .report_checks import check, expect, line_of


def test_nan_within_first_steps_points_to_lr_and_warmup(tmp_path):
    lab = run("regress", tmp_path / "run", "--lr", "0.5")
    assert lab.returncode == 1
    r = check(lab.log, tmp_path / "out")
    expect(r, cls="nan-inf", status="diverged", log=lab.log, line_text="FloatingPointError: Loss became infinite or NaN",
           fix_id="lower-lr-add-warmup", risk="needs-approval", validation="next 200 steps", decision="NO-GO")
    assert r.data["fixes"][0]["fix_id"] == "lower-lr-add-warmup"
    nan = next(a for a in r.data["anomalies"] if a["kind"] == "nan-onset")
    assert "first 100 steps" in nan["detail"]
    assert nan["line_no"] == line_of(lab.log, "| loss inf") or nan["line_no"] == line_of(lab.log, "| loss nan")
    assert [f["fix_id"] for f in r.data["fixes"]].index("find-bad-batch") > 0  # early NaN is rarely one batch


def test_nan_after_stable_steps_points_to_the_bad_batch(tmp_path):
    lab = run("regress", tmp_path / "run", "--bad-record-step", "400")
    assert lab.returncode == 1
    r = check(lab.log, tmp_path / "out")
    expect(r, cls="nan-inf", status="diverged", log=lab.log, line_text="FloatingPointError: Loss became infinite or NaN at iteration=400",
           fix_id="find-bad-batch", risk="safe", validation="replayed batch", decision="NO-GO")
    assert r.data["fixes"][0]["fix_id"] == "find-bad-batch"
    nan = next(a for a in r.data["anomalies"] if a["kind"] == "nan-onset")
    assert nan["line_no"] == line_of(lab.log, "step 400 | loss nan")
    assert "after 399 stable steps" in nan["detail"] and "corrupt late batch" in nan["detail"]
    # the same run from its directory (log + config.json + command.txt) says the same
    d = check(lab.run_dir, tmp_path / "out-dir")
    assert d.data["primary_cause"] == "nan-inf" and d.data["fixes"][0]["fix_id"] == "find-bad-batch"


def test_loss_blowup_without_nan_is_divergence(tmp_path):
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
