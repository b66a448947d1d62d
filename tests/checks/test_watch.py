"""watch-run against real training processes that are still running while it polls."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import run_cli

SCRIPT = Path(__file__).parent / "scenarios" / "slow_train.py"


@pytest.fixture
def live_run(tmp_path):
    procs = []

    def start(*args: str, logged: str = "step 1 ") -> Path:
        """Start the run and return its log once it holds `logged`: importing torch on a loaded machine can
        outlast a watch's --stall-after, and a run that has logged no step yet is rightly called stalled."""
        log = tmp_path / "train.log"
        f = open(log, "w")  # noqa: SIM115 (closed in teardown, after the run is killed)
        p = subprocess.Popen([sys.executable, "-u", str(SCRIPT), *args], stdout=f, stderr=subprocess.STDOUT)
        procs.append((p, f))
        deadline = time.monotonic() + 300
        while logged not in log.read_text():
            assert p.poll() is None, f"the run ended (exit {p.returncode}) before logging {logged!r}: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"the run logged no {logged!r} within 300 s"
            time.sleep(0.2)
        return log

    yield start
    for p, f in procs:
        p.kill()
        p.wait()
        f.close()


def test_healthy_run_passes_the_validation_step(live_run):
    log = live_run("--mode", "healthy", "--steps", "400", "--step-seconds", "0.02")
    proc = run_cli("watch-run", str(log), "--interval", "0.5", "--until-step", "40", "--stall-after", "30", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "validation criterion holds" in proc.stdout and "progress: step" in proc.stdout


def test_nan_alert_stops_the_watch(live_run):
    log = live_run("--mode", "nan", "--steps", "400", "--at", "25", "--step-seconds", "0.05")
    proc = run_cli("watch-run", str(log), "--interval", "0.5", "--stall-after", "30", timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nan" in proc.stdout.lower() and "done:" in proc.stdout


def test_stall_is_detected_on_a_live_hung_process(live_run):
    log = live_run("--mode", "stall", "--steps", "400", "--at", "5", "--step-seconds", "0.05", logged="step 5 ")  # the hang
    proc = run_cli("watch-run", str(log), "--interval", "0.5", "--stall-after", "3", "--format", "json", timeout=120)
    assert proc.returncode == 1
    import json

    result = json.loads(proc.stdout)
    assert not result["healthy"] and "stalled" in result["reason"] and result["last_step"] == 5
