"""A run that went NaN and is still running and saving: stopping it is the first action of the plan.

A real PyTorch CPU job (procs/nan_saves.py: a learning-rate schedule that jumps to 5.0, the loss overflows
to inf and NaN, the loop goes on saving every 10 steps) is watched through the process collector while it
runs. Its next save writes NaN weights where the last good checkpoint was: the plan's first fix stops it
(needs approval: it ends work in progress), names the last good checkpoint and the step of the next save.
The same log read after the process is gone gets no such fix: there is nothing left to stop.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

JOB = Path(__file__).parent / "procs" / "nan_saves.py"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("nanjob")
    log = out / "train.log"
    with open(log, "wb") as f:
        p = subprocess.Popen([sys.executable, "-u", str(JOB), str(out)], stdout=f, stderr=subprocess.STDOUT, cwd=out,
                             env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    try:
        end = time.monotonic() + 120
        while "loss nan" not in log.read_text() and p.poll() is None and time.monotonic() < end:
            time.sleep(0.1)
        assert "loss nan" in log.read_text(), log.read_text()[-2000:]
        yield p, log
    finally:
        p.kill()
        p.wait()


def _last_good(log: Path) -> tuple[str, int]:
    """The newest checkpoint the log saved before its loss was first non-finite (inf or nan)."""
    last = ("", 0)
    for line in log.read_text().splitlines():
        if (m := re.match(r"step \d+ \| loss (\S+)", line)) and m.group(1) in ("inf", "nan"):
            return last
        if (m := re.match(r"Saving checkpoint to (\S+step_(\d+)\.pt)", line)):
            last = (m.group(1), int(m.group(2)))
    return last


def test_a_live_nan_run_that_keeps_saving_is_stopped_first(job, monkeypatch: pytest.MonkeyPatch) -> None:
    p, log = job
    monkeypatch.setenv("ML_SKILLS_PROC_SAMPLE", "0.6")
    d = diagnose(DiagnoseRequest(pid=p.pid))
    assert p.poll() is None  # still running while it was read
    first = d.fixes[0]
    assert first.fix_id == "stop-before-next-save", [f.fix_id for f in d.fixes]
    assert first.risk.value == "needs-approval" and first.kind.value == "kill-worker"
    assert first.command is not None and first.command.startswith(f"kill -STOP {p.pid} ")
    assert d.next_commands[0] == first.command
    path, step = _last_good(log)
    assert step > 0 and f"last good checkpoint is {path}" in first.because, first.because
    nxt = re.search(r"saves every (\d+) steps, next at step (\d+)", first.because)
    assert nxt and nxt.group(1) == "10" and int(nxt.group(2)) % 10 == 0 and int(nxt.group(2)) > step, first.because
    assert len(d.fixes) >= 2  # the fixes for the NaN itself follow


def test_the_same_log_of_a_finished_run_gets_no_stop(job) -> None:
    _, log = job
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.fixes and "stop-before-next-save" not in [f.fix_id for f in d.fixes]
