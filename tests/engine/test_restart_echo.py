"""A launcher's untimed output (nohup.out) printing the kill of an attempt that the run's own log records and went on
past is that same kill: the run recovered (the thirteenth user trial's case07 read as oom, crashed: bash's 'Killed' job
line in nohup.out for the first attempt, while train.log shows the restart and 'training complete'). A real restart loop
under a real bash, its first attempt really SIGKILLed; and a control whose one attempt is killed with no restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

_TRAIN = """
import logging, os, sys, time
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s train: %(message)s")
log = logging.getLogger("train")
start = int(open("last_step").read()) if os.path.exists("last_step") else 0
log.info("start pid %d, resuming at step %d", os.getpid(), start)
for step in range(start + 1, 401):
    time.sleep(0.01)
    if step % 25 == 0:
        log.info("step %d/400 loss %.4f", step, 1.0 / step)
        open("last_step", "w").write(str(step))
log.info("training complete: 400 steps")
"""

_RUN = """#!/usr/bin/env bash
cd "$(dirname "$0")"
for attempt in 1 2 3; do
  {py} train.py >> train.log 2>&1 && exit 0
  rc=$?
  echo "[run.sh $(date '+%F %T')] train.py exited with code $rc (attempt $attempt), restarting" >> train.log
  [ "{restart}" = yes ] || exit $rc
done
exit 1
"""


def _run(tmp_path: Path, restart: bool) -> Path:
    (tmp_path / "train.py").write_text(_TRAIN)
    (tmp_path / "run.sh").write_text(_RUN.format(py=sys.executable, restart="yes" if restart else "no"))
    with (tmp_path / "nohup.out").open("w") as out:
        launcher = subprocess.Popen(["bash", "run.sh"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while "step 100/400" not in ((tmp_path / "train.log").read_text() if (tmp_path / "train.log").exists() else ""):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = subprocess.run(["pgrep", "-P", str(launcher.pid)], capture_output=True, text=True, check=False).stdout.split()
    os.kill(int(child[0]), signal.SIGKILL)
    launcher.wait(timeout=120)
    assert "Killed" in (tmp_path / "nohup.out").read_text()
    return tmp_path


def test_a_kill_in_nohup_out_that_the_run_restarted_from_and_completed_is_survived(tmp_path: Path):
    run = _run(tmp_path, restart=True)
    assert "training complete" in (run / "train.log").read_text()
    d = diagnose(DiagnoseRequest(target=str(run)))
    assert d.primary_cause is None
    assert d.run_status.value in ("completed", "recovered")


def test_the_same_kill_with_no_restart_is_the_end_of_the_run(tmp_path: Path):
    run = _run(tmp_path, restart=False)
    assert "training complete" not in (run / "train.log").read_text()
    d = diagnose(DiagnoseRequest(target=str(run)))
    assert d.primary_cause is not None
    assert d.run_status.value == "crashed"
