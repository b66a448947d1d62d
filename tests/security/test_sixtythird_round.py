"""Issue 14's sixty-third round: an outside tester's real restarts (a helper session that did not write this code); the
break failed on the code before its fix (docs/security.md, "Sixty-third round").

The fifty-ninth round's pin started pyenv's shim with PYENV_VERSION set to the nearest `.python-version`'s first word, as
read. pyenv refuses a version *file's* word holding `/` or `..` (CVE-2022-35861) but trusts the *variable*: a file saying
`../../../RUN/env` ran the run folder's `env/bin/python` (and `env/bin/torchrun`), and `3.11.7/./././...` padded past the
question's 60-character quote read as `3.11.7`. The pin is now only a plain name pyenv has installed (`versions/NAME`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.mcp.conftest import answer
from tests.security.test_fiftyninth_round import SHIMS, ask_restart, needs_pyenv
from tests.security.test_fortysecond_round import _run_folder

pytestmark = [pytest.mark.slow, needs_pyenv]  # real child processes through pyenv's real shim


def _planted_env(run: Path, marker: Path) -> None:
    (run / "env" / "bin").mkdir(parents=True)
    for name in ("python", "torchrun"):
        (run / "env" / "bin" / name).write_text(f"#!/bin/sh\necho \"$0 $*\" > {marker}\n")
        (run / "env" / "bin" / name).chmod(0o755)


@pytest.mark.parametrize("pad, line", [("", "python train.py"), ("3.11.7/" + "./" * 60, "python train.py"),
                                       ("3.11.7/" + "./" * 60, "torchrun --nproc-per-node 1 --standalone train.py")],
                         ids=["path", "padded-past-the-quote", "padded-torchrun"])
def test_a_version_file_naming_a_path_never_picks_the_interpreter(tmp_path: Path, monkeypatch, pad: str, line: str) -> None:
    monkeypatch.setenv("PATH", f"{SHIMS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYENV_VERSION", raising=False)
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    _planted_env(run, marker)
    (run / "train.py").write_text("print('train')\n")
    (run / "command.txt").write_text(line + "\n")
    (run / ".python-version").write_text(pad + "../" * 8 + str(run / "env").lstrip("/") + "\n")
    person = answer("accept")
    got = ask_restart(tmp_path, run, person)
    time.sleep(4)
    assert not marker.exists(), (got, person.shown)
    assert "not an interpreter pyenv has installed" in got, got


def test_a_version_file_naming_an_installed_interpreter_still_restarts(tmp_path: Path, monkeypatch) -> None:
    """Control: `.python-version` saying `3.11.7` (installed here) pins the shim to it, and the script runs."""
    monkeypatch.setenv("PATH", f"{SHIMS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYENV_VERSION", raising=False)
    run = _run_folder(tmp_path)
    ran = tmp_path / "RAN"
    (run / "train.py").write_text(f"import sys\nopen({str(ran)!r}, 'w').write('.'.join(map(str, sys.version_info[:2])))\n")
    (run / "command.txt").write_text("python train.py\n")
    (run / ".python-version").write_text("3.11.7\n")
    person = answer("accept")
    got = ask_restart(tmp_path, run, person)
    for _ in range(40):
        if ran.exists():
            break
        time.sleep(0.5)
    assert ran.exists() and ran.read_text() == "3.11", (got, person.shown)
    assert 'PYENV_VERSION="3.11.7"' in person.shown[0], person.shown
