"""A short coverage-guided atheris run per target (the long run is documented in docs/security.md).

Each target runs in its own process under libFuzzer; an unexpected exception, a broken property
or an input slower than 10 s fails the run (non-zero exit, the input printed).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")

ROOT = Path(__file__).resolve().parents[2]
RUNS = {"inspect_checkpoint": 150, "cli_args": 1000, "read_log": 1000, "scan_text": 1500}


@pytest.mark.parametrize("target", ["scan_text", "parse_line", "parse_traceback", "inspect_checkpoint", "redact",
                                    "read_log", "fence", "cli_args"])
def test_atheris_short_run_finds_no_crash(target: str) -> None:
    runs = RUNS.get(target, 3000)
    proc = subprocess.run([sys.executable, "-m", "tests.security.fuzz", target, f"-runs={runs}", "-max_len=4096",
                           f"-dict={ROOT / 'tests/security/fuzz.dict'}", "-seed=1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    done = re.search(r"Done (\d+) runs", proc.stderr)
    assert done and int(done.group(1)) == runs
