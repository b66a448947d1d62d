"""A log that stops inside its loop's routine is a run in progress, whatever template the loop prints
(engine/analyse/routine.py). Each log here is read while its real training process is still running; the
controls are real processes whose repeated lines are a wait or the same numbers again, which are no progress."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]

# a tabular Q-learning loop that prints its own record shape, which no progress regex or metric parser knows
_QLEARN = """
    import random, sys, time
    random.seed(0)
    q = [[0.0, 0.0] for _ in range(8)]
    cycle = 0
    while True:
        cycle += 1
        wins, utility = 0, 0.0
        for _ in range(50):
            s = random.randrange(8); a = max((0, 1), key=lambda k: q[s][k] + random.random() * 0.1)
            r = 1.0 if (s + a) % 3 == 0 else -0.2
            q[s][a] += 0.1 * (r - q[s][a]); utility += r; wins += r > 0
        print(f"after cycle={cycle} avg(utility)={utility / 50!r} avg(num_wins)={wins / 50}", flush=True)
        time.sleep(0.02)
"""

# the same process shape, but its repeated lines are a wait for a service, or a counter that never moves
_WAIT = """
    import sys, time
    n = 0
    while True:
        n += 1
        print(f"Dataset server not ready, waiting 5s (attempt {n}/100)", flush=True)
        time.sleep(0.02)
"""

_SAME = """
    import time
    print("epoch 1 step 10 loss 2.31", flush=True)
    while True:
        print("queue size 0 of 64 batches ready", flush=True)
        time.sleep(0.02)
"""


def _status_while_running(tmp_path: Path, code: str, lines: int = 40) -> str:
    (tmp_path / "train.py").write_text(textwrap.dedent(code), encoding="utf-8")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "train.py"], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while log.read_text().count("\n") < lines and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the training process should still be running while its log is read"
        copy = tmp_path / "copy" / "train.log"  # a log copied while the run writes it, as users hand them over
        copy.parent.mkdir()
        text = log.read_text()
        copy.write_text(text[: text.rfind("\n") + 1])
        d = diagnose(DiagnoseRequest(target=str(copy)))
    finally:
        proc.kill()
        proc.wait()
    assert d.primary_cause is None
    return d.run_status.value


def test_a_log_read_inside_its_loops_own_record_shape_is_running(tmp_path: Path):
    assert _status_while_running(tmp_path, _QLEARN) == "running"


@pytest.mark.parametrize("code", [_WAIT, _SAME], ids=["a-wait-repeated", "the-same-numbers-repeated"])
def test_a_repeated_wait_or_an_unmoving_line_is_not_progress(tmp_path: Path, code: str):
    assert _status_while_running(tmp_path, code) != "running"


@pytest.mark.parametrize("n", ["104", "142", "038", "202"])
def test_public_logs_cut_inside_their_routine_are_running(n: str):
    """Verbatim public logs (tests/healthy/*/case.json cites each) that end in a loop's records: cycle records,
    'Iteration = 4000 Error = 1.137' (an error metric), YOLO epoch and mAP rows, a federated round's summary
    ('received 2 results and 0 failures')."""
    log = next((TESTS / "healthy").glob(f"{n}-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert (d.primary_cause, d.run_status.value) == (None, "running")
