"""Capture the example of docs/triage.md: the test grid (tests/grid/conftest.py) really launched, then triaged.

    PYTHONPATH=server:. python bench/triage_example.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.grid.conftest import build_grid


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="triage-example-"))
    g = build_grid(root)
    cmd = [sys.executable, "-m", "ml_skills.cli", "triage-runs", "grid", "--expect", "grid.csv", "--results", "results/*.json",
           "--out-dir", "out"]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False, env=dict(os.environ))
    print(f"# grid launched in {g.seconds:.1f} s under {root}; exit code {proc.returncode}")
    print("$ ml-skills triage-runs grid --expect grid.csv --results 'results/*.json' --out-dir out")
    print(proc.stdout + proc.stderr)


if __name__ == "__main__":
    main()
