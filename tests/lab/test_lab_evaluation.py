"""evaluation-mismatch, for real: runs that finish without an error and still produce a useless model.

The shard-zero run trains on the one shard that existed when it started (train loss falls,
validation loss climbs); the leaky-split run validates on copies of its training samples
(validation is perfect at the first evaluation). Both are found from the per-epoch metrics.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.lab.harness import run

EPOCH = re.compile(r" INFO epoch (\d+) train_loss (\S+) val_loss (\S+) val_acc (\S+)$")


def _epochs(log: Path) -> list[tuple[int, int, float, float, float]]:
    """(line number, epoch, train loss, val loss, val acc) of every epoch line the real run wrote."""
    out = []
    for i, line in enumerate(log.read_text(errors="replace").splitlines(), start=1):
        if m := EPOCH.search(line):
            out.append((i, int(m[1]), float(m[2]), float(m[3]), float(m[4])))
    return out


def _fix(report: dict, fix_id: str) -> dict:
    fix = next((f for f in report["fixes"] if f["fix_id"] == fix_id), None)
    assert fix is not None, [f["fix_id"] for f in report["fixes"]]
    return fix


def test_trainer_that_saw_only_shard_zero_is_diagnosed_as_memorisation(tmp_path, cli):
    r = run("shard_zero", tmp_path, "--delay", "0.4", timeout=400)
    assert r.returncode == 0, r.log.read_text()
    text = r.log.read_text()
    assert "from 1 file(s)" in text  # the story happened: one shard read...
    assert len(list((tmp_path / "data").glob("shard-*.pt"))) == 8  # ...of the eight finally written
    epochs = _epochs(r.log)
    assert epochs[-1][2] < epochs[0][2] and epochs[-1][3] > min(e[3] for e in epochs)

    proc, rep = cli(str(r.log))
    assert proc.returncode == 0, proc.stderr
    assert rep["primary_cause"] == "evaluation-mismatch"
    assert rep["run_status"] == "degraded"  # it ran to its end, with a useless result: completed-but-degraded
    last_line = epochs[-1][0]
    assert rep["root_cause"]["proximate_line"]["line_no"] == last_line
    assert "memorisation" in rep["root_cause"]["root"]
    anomaly = next(a for a in rep["anomalies"] if a["kind"] == "train-val-divergence")
    assert anomaly["line_no"] == last_line
    assert f"validation loss climbed from its best {min(e[3] for e in epochs):.4g}" in anomaly["detail"]
    fix = _fix(rep, "input-completeness-check")
    assert fix["risk"] == "needs-approval" and "shard count" in fix["validation"]
    first = rep["fixes"][0]
    assert first["fix_id"] == "check-train-data-coverage" and first["risk"] == "safe"
    assert rep["decision"] == "NO-GO"


def test_a_day_on_shard_zero_in_a_long_log_is_still_found(tmp_path, cli):
    """The same story logged every step: the log is big enough to be sampled, and its 25 validation
    lines among 24,000 step lines are what show the memorisation."""
    r = run("shard_zero", tmp_path, "--delay", "0.4", "--passes", "320", "--log-steps", timeout=900)
    assert r.returncode == 0, r.log.read_text()[-3000:]
    epochs = _epochs(r.log)
    assert len(epochs) == 25 and epochs[-1][3] > min(e[3] for e in epochs)

    proc, rep = cli(str(r.log))
    assert proc.returncode == 0, proc.stderr
    assert any("metrics sampled" in e["text"] for e in rep["evidence"]), rep["evidence"]  # the sampled path ran
    assert rep["primary_cause"] == "evaluation-mismatch"
    anomaly = next(a for a in rep["anomalies"] if a["kind"] == "train-val-divergence")
    assert anomaly["line_no"] == epochs[-1][0]
    assert f"validation loss climbed from its best {min(e[3] for e in epochs):.4g}" in anomaly["detail"]


def test_validation_copied_from_training_is_perfect_too_early(tmp_path, cli):
    r = run("leaky_split", tmp_path, timeout=120)
    assert r.returncode == 0, r.log.read_text()
    epochs = _epochs(r.log)
    first_line, _, _, _, first_acc = epochs[0]
    assert first_acc == 1.0  # the leak really happened at the first evaluation

    proc, rep = cli(str(r.log))
    assert proc.returncode == 0, proc.stderr
    assert rep["primary_cause"] == "evaluation-mismatch"
    assert rep["run_status"] == "degraded"  # it ran to its end, with a useless result: completed-but-degraded
    assert rep["root_cause"]["proximate_line"]["line_no"] == first_line
    assert "train/validation overlap" in rep["root_cause"]["root"]
    assert any(a["kind"] == "early-perfect-validation" and a["line_no"] == first_line for a in rep["anomalies"])
    first = rep["fixes"][0]
    assert first["fix_id"] == "check-split-overlap" and first["risk"] == "safe" and "leakage" in first["validation"]
    dedupe = _fix(rep, "dedupe-splits")
    assert dedupe["risk"] == "needs-approval" and "hash intersection" in dedupe["validation"]
    assert rep["decision"] == "NO-GO"
