"""Runs written once per session by the real wandb library, shared by the W&B collector and tool tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT


def check_failed_run(
    *args: str, out: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    """Run the real CLI in a child process; return it and the JSON report it wrote (if any)."""
    proc = subprocess.run(
        [sys.executable, "-m", "ml_skills.cli", "check-failed-run", *args, "--out-dir", str(out)],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    report = out / "check-failed-run.json"
    return proc, (json.loads(report.read_text()) if report.exists() else None)


@pytest.fixture(scope="session")
def offline_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wandb")
    env = {**os.environ, "WANDB_DIR": str(root), "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
    cmd = [sys.executable, "-m", "tests.collectors.wandb_offline"]
    subprocess.run([*cmd, "nan", "diverging", "healthy", "precursor"], cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    killed = subprocess.run([*cmd, "killed"], cwd=ROOT, env=env, capture_output=True, timeout=300, check=False)
    assert killed.returncode == 137
    runs = {k: next((root / "wandb").glob(f"offline-run-*-{k}run")) for k in ("nan", "diverging", "healthy", "killed", "precursor")}
    return runs
