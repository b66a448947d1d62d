"""A short coverage-guided atheris run per target (the long run is documented in docs/security.md).

Each target runs in its own process under libFuzzer, from a corpus seeded with real inputs (the
repo's real logs, fresh fake secrets, real checkpoints and argv); an unexpected exception, a
broken property or an input slower than 10 s fails the run (non-zero exit, the input printed).
Runs are sized for a few CPU seconds per target; tests/security/report.py runs the same command
and prints the figures.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.figures import record

pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris: Linux wheels for CPython 3.11+); "
                                      "the hypothesis tests in test_properties.py still cover every target")

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ["scan_text", "parse_line", "parse_traceback", "inspect_checkpoint", "redact", "read_log", "fence", "cli_args",
           "safetensors_header", "checkpoint_dir", "wandb_run"]
RUNS = {"scan_text": 1000, "cli_args": 1000, "inspect_checkpoint": 800, "safetensors_header": 1000, "checkpoint_dir": 500,
        "wandb_run": 1000}
DEFAULT_RUNS = 2000
# Longer inputs where the attacks are long: a metric line nested 1,900 deep is 3,800 bytes before its
# key, and a JSON header only breaks the standard parser past a thousand levels. 4096 everywhere
# missed both (issue 14).
MAX_LEN = {"parse_line": 8192, "safetensors_header": 65536, "checkpoint_dir": 16384, "wandb_run": 65536}
DEFAULT_MAX_LEN = 4096


def fuzz_command(target: str, runs: int, crashes: Path) -> list[str]:
    """The short run; a crashing input is written under `crashes` (keep it in tests/security/fuzz_crashes/)."""
    return [sys.executable, "-m", "tests.security.fuzz", target, f"-runs={runs}", f"-max_len={MAX_LEN.get(target, DEFAULT_MAX_LEN)}",
            f"-dict={ROOT / 'tests/security/fuzz.dict'}", "-seed=1", f"-artifact_prefix={crashes}/"]


@pytest.mark.parametrize("target", TARGETS)
def test_atheris_short_run_finds_no_crash(target: str, tmp_path: Path) -> None:
    runs = RUNS.get(target, DEFAULT_RUNS)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(fuzz_command(target, runs, tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=600,
                          # its seed corpus is a mkdtemp that libFuzzer's exit never removes: under tmp_path, pytest does
                          env={**os.environ, "PYTHONHASHSEED": "0", "TMPDIR": str(tmp_path)}, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    done = re.search(r"Done (\d+) runs", proc.stderr)
    assert done and int(done.group(1)) >= runs  # libFuzzer runs every seed even when the seeds outnumber -runs
    seeded = re.search(r"INFO:\s+(\d+) files found", proc.stderr)
    assert seeded and int(seeded.group(1)) > 0  # it started from real inputs, not from nothing
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    edges = re.search(r"DONE\s+cov: (\d+)", proc.stderr)
    record("fuzz runs (atheris, short)", target, runs)
    record("fuzz coverage edges (atheris, short)", target, int(edges.group(1)) if edges else 0)
    record("fuzz CPU seconds (atheris, short)", target, round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1))
