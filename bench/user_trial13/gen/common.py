"""Helpers shared by the case generators (orchestration only: every training script they run is
standalone, copied into the case folder as train.py and run from there)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

GEN = Path(__file__).resolve().parent
OUT = Path(os.environ.get("T13_OUT", "/work/trial13"))
PY = sys.executable


def fresh(case: str) -> Path:
    d = OUT / case
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def install_script(src: str, dst_dir: Path, name: str = "train.py") -> Path:
    dst = dst_dir / name
    shutil.copy(GEN / src, dst)
    return dst


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def mem_available_mb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def wait_for_text(path: Path, text: str, timeout: float = 300.0, proc: subprocess.Popen | None = None) -> bool:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            if text in path.read_text(errors="replace"):
                return True
        except OSError:
            pass
        time.sleep(0.02)
    return False


def sigkill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def log(msg: str) -> None:
    print(f"[gen {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def stage_script(src: str, project: str) -> Path:
    """Copy a training script to a neutral project path (trackers record the program path)."""
    d = Path("/tmp/t13work/proj") / project
    d.mkdir(parents=True, exist_ok=True)
    dst = d / "train.py"
    shutil.copy(GEN / src, dst)
    return dst
