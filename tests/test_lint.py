"""The repository passes its own linter: ruff, pinned in the test extra, with ruff's default rule set for the pinned version,
over the package, the tests and the benchmarks (what .pre-commit-config.yaml runs too)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ["server", "tests", "bench"]


def test_the_repository_is_ruff_clean() -> None:
    ruff = shutil.which("ruff") or (Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed: pip install -e '.[test]' installs the pinned version")
    r = subprocess.run([str(ruff), "check", "--no-cache", *CHECKED], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_the_pre_commit_hooks_run_what_the_tests_run() -> None:
    """.pre-commit-config.yaml's local hooks are the same commands as this test and tests/test_types.py: they cannot drift."""
    import yaml

    hooks = {h["id"]: h for repo in yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"] for h in repo["hooks"]}
    assert hooks["ruff"]["entry"].split() == ["ruff", "check", "--no-cache", *CHECKED]
    assert hooks["mypy"]["entry"] == "mypy"  # files, plugin and settings come from pyproject.toml's [tool.mypy]
    assert all(h["language"] == "system" and h["pass_filenames"] is False for h in hooks.values())
