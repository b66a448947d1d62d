"""Confidence is the measured accuracy of verdicts of a kind: the engine's figures are the fit, the fit holds
on the held-out half, and real runs get the figure of the evidence they rest on."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.classify.confidence import ACCURACY, KINDS, LABEL_ACCURACY
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.engine import accuracy_bench


@pytest.fixture(scope="module")
def bench():
    return accuracy_bench.load()


def test_the_engines_confidences_are_the_fit_on_the_dev_half_of_the_prospective_verdicts(bench):
    verdicts = bench.prospective()
    assert len(verdicts) >= 250  # every History batch, re-scored by the engine that first met it
    assert bench.fit(verdicts) == {k: ACCURACY[k] for k in KINDS}


def test_labels_measured_apart_are_the_fit_on_the_dev_half_and_hold_on_the_held_out_half(bench):
    verdicts = bench.prospective()
    fitted = bench.fit(verdicts)
    labels = bench.fit_labels(verdicts)
    assert labels == LABEL_ACCURACY
    # the finer figures predict the held-out half at least as well as the kinds' alone
    held = [v for v in verdicts if v["half"] == "held-out"]
    by_kind = [(bench._conf(v["kind"], fitted), v["right"]) for v in held]
    by_label = [(bench._conf(v["kind"], fitted, v["label"], labels), v["right"]) for v in held]
    assert bench.brier(by_label) <= bench.brier(by_kind)


# Met again since batch 555-588 joined the prospective verdicts (2026-12-01 evening): with the confidences refitted on
# the dev half (exception-located fell from 0.94 to 0.85), every held-out bin of 20 or more verdicts is within 0.1. It
# was a strict xfail before (the 0.90-0.95 bin held 27 held-out verdicts at confidence 0.93 and accuracy 0.81).
# Broken again by the twelfth batch (2026-12-02, 863 prospective verdicts): the dev half fits exception-located at
# 0.86, but the 39 held-out verdicts in the 0.80-0.90 bin are right 0.74 of the time (0.12 off). A strict xfail until
# a refit holds: it fails loudly (XPASS) once the bins agree again; docs/accuracy.md prints the table.
# Met again with the thirteenth batch (912 prospective verdicts): refitted on the dev half (exception-named 0.92 -> 0.83,
# exception-located 0.86 -> 0.87, stop 0.75 -> 0.68), the 56 held-out verdicts in the 0.80-0.90 bin are right 0.80 of
# the time at 0.86, the 69 in 0.90-0.95 0.90 at 0.90, the 190 above 0.95 0.98 at 0.97.
# Broken again when the healthy set's prospective verdicts joined the fit (2026-12-04, 886 verdicts): a class named on a
# run that did not fail is a wrong verdict, and most false alarms rest on a metric anomaly or a located exception; the dev
# half fits anomaly 0.69 and exception-located 0.77, but held-out they are right 9/23 and 13/24 (the 0.5-0.8 bin: 75
# verdicts at a mean 0.73, right 0.56). A strict xfail until a refit or a narrower reading holds (XPASS fails loudly).
# Holding again after the refit of 2026-12-07 (batches 125-134 joined: 1,376 verdicts with a class, 692 held-out): 0.5-0.8
# 112 at a mean 0.70, right 0.63; 0.8-0.9 44 at 0.82, right 0.75; 0.9-0.95 337 at 0.92, right 0.91; above 0.95 181 at 0.97,
# right 0.99; Brier 0.095, close to its 0.1 bound. The xfail is gone: a batch that breaks it again fails the suite.
def test_in_every_bin_of_twenty_or_more_held_out_verdicts_accuracy_is_within_a_tenth_of_the_confidence(bench):
    verdicts = bench.prospective()
    fitted = bench.fit(verdicts)
    labels = bench.fit_labels(verdicts)
    pairs = [(bench._conf(v["kind"], fitted, v["label"], labels), v["right"]) for v in verdicts if v["half"] == "held-out"]
    checked = 0
    for lo, hi in bench.BINS:
        inside = [(c, ok) for c, ok in pairs if lo <= c < hi]
        if len(inside) >= 20:
            checked += 1
            mean = sum(c for c, _ in inside) / len(inside)
            acc = sum(ok for _, ok in inside) / len(inside)
            assert abs(acc - mean) <= 0.1, (lo, hi, len(inside), mean, acc)
    assert checked >= 2
    assert bench.brier(pairs) < 0.1


def _run(tmp_path: Path, shell: str) -> Path:
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run(["bash", "-c", shell], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=180, check=False)
    return log


def test_a_kill_that_names_no_cause_is_no_surer_than_an_exception_that_names_itself(tmp_path):
    killed = tmp_path / "killed"
    killed.mkdir()
    code = "import os; [print(f'epoch {i} loss {1/(i+1):.3f}', flush=True) for i in range(3)]; os.kill(os.getpid(), 9)"
    kill = diagnose(DiagnoseRequest(target=str(_run(killed, f'{sys.executable} -c "{code}"; echo "exit $?"'))))
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "resume.py").write_text(textwrap.dedent("""
        import torch
        torch.save({"w": torch.randn(256, 256)}, "last.pt")
        data = open("last.pt", "rb").read()
        open("last.pt", "wb").write(data[: len(data) // 3])  # the job was killed while it wrote
        print("resuming from last.pt", flush=True)
        torch.load("last.pt")
    """))
    named = diagnose(DiagnoseRequest(target=str(_run(truncated, f"{sys.executable} resume.py"))))
    assert kill.primary_cause is not None and kill.confidence_basis == "symptom"
    assert named.primary_cause is not None and named.primary_cause.value == "io-checkpoint"
    assert named.confidence_basis in ("signature", "exception-named")  # the exception's own line names the failure
    # a symptom's figure: its kind's, or its label's where that was measured apart (an exit code 137), capped at the
    # signatures' figure (engine/classify/confidence.py)
    assert kill.primary_cause_confidence in {ACCURACY["symptom"]} | {min(v, ACCURACY["signature"]) for v in LABEL_ACCURACY.values()}
    # never surer than the exception that names itself (the prospective verdicts put exit code 137's label at the
    # signatures' figure, 0.95, from batch 27, and above it, 0.96, from batch 33: the cap holds it there)
    assert kill.primary_cause_confidence <= named.primary_cause_confidence == ACCURACY[named.confidence_basis]


def test_an_exception_no_rule_knows_gets_its_labels_measured_figure_not_its_kinds(tmp_path):
    # a real script ending in an exception no rule names: the verdict rests on 'traceback:unclassified-exception',
    # whose prospective verdicts were right about four times in five, less than its kind's (a symptom's) figure
    (tmp_path / "train.py").write_text("print('epoch 1 loss 0.9', flush=True)\nraise RuntimeError('Unknown model (vit)')\n")
    d = diagnose(DiagnoseRequest(target=str(_run(tmp_path, f"{sys.executable} train.py"))))
    assert d.primary_cause is not None
    assert d.primary_cause_confidence == LABEL_ACCURACY["traceback:unclassified-exception"]
    assert d.primary_cause_confidence < ACCURACY["symptom"]
