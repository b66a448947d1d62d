"""A terminal's echo of other keys before the '^C' of a Ctrl-C still reads as a person interrupting the run.

Corpus 1129 (a public BasicSR report): progress stops at iteration 3,700, then '^[[6~^CTraceback (most recent call
last):' - the PageDown the user pressed while waiting, echoed as '^[[6~', then the Ctrl-C - with frames cut inside
the data prefetcher.
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def test_echoed_keys_before_the_interrupt():
    log = next((TESTS / "corpus").glob("1129-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled"
    assert any("user-interrupt-echo" in e.text for e in d.evidence)
