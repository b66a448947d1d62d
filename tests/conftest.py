"""Shared fixtures. Tests import the installed package (pip install -e '.[test]')."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, cwd: str | os.PathLike[str] | None = None, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real `ml-skills` entry point in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "ml_skills.cli", *args],
        cwd=cwd, input=stdin.decode() if stdin is not None else None, capture_output=True, text=True, timeout=timeout,
        check=False,
    )


@pytest.fixture
def cli(tmp_path: Path):
    def _run(*args: str, stdin: bytes | None = None) -> tuple[subprocess.CompletedProcess[str], dict | None]:
        out = tmp_path / "out"
        proc = run_cli("check-failed-run", *args, "--out-dir", str(out), stdin=stdin)
        report = out / "check-failed-run.json"
        return proc, (json.loads(report.read_text()) if report.exists() else None)

    return _run
