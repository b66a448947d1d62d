"""The package passes its own type check: mypy, pinned in the test extra, with the pydantic plugin and the settings in
pyproject.toml's [tool.mypy] (what .pre-commit-config.yaml runs too)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # about a minute with a cold .mypy_cache, seconds with a warm one
def test_the_package_is_mypy_clean() -> None:
    mypy = shutil.which("mypy") or (Path(sys.executable).parent / "mypy")
    if not Path(mypy).exists():
        pytest.fail("mypy is not installed: pip install -e '.[test]' installs the pinned version")
    r = subprocess.run([str(mypy)], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "Success: no issues found" in r.stdout, r.stdout[-2000:]
