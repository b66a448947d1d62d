"""The CLI in a child process, as the security rounds drive it: under a 3 GiB address-space cap, with this process's
environment (its PYTHONPATH names the code under test), timed against a control log in the same minutes."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def memory_cap() -> None:
    """The child's address space held to 3 GiB: a blow-up ends in MemoryError, not in the machine's OOM killer."""
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def cli(*args: str, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`ml-skills ARGS` in a child process under memory_cap."""
    return subprocess.run([sys.executable, "-m", "ml_skills.cli", *args], check=False, capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, **(env or {})}, preexec_fn=memory_cap)


def cli_seconds(log: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """check-failed-run on `log` as JSON, and how long it took."""
    t = time.monotonic()
    proc = cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(tmp_path / "out"), cwd=tmp_path, timeout=120)
    return proc, time.monotonic() - t


def no_slower_than(took: float, control: float) -> bool:
    """Within 3x (and 3 s) of the same command on a control log without the hostile runs: a ratio in the same minutes,
    which a loaded machine moves less than a wall-clock limit (the super-linear searches took 7-20x their control)."""
    return took < max(3 * control, control + 3)
