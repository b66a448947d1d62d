"""Issue 14's fifty-sixth round: an outside tester's real restarts (a helper session that did not write this code); the
break failed on the code before its fix (docs/security.md, "Fifty-sixth round").

With the server started by its interpreter's real path and pyenv's shims on PATH, `python train.py` restarted through the
shim, which picks the interpreter from a `.python-version` in the folder it starts in: a planted one ran Python 2.7.18
while the question showed only `python train.py` (listed as kept since the thirty-second round; now the question names the
file and what it says, and a file written after the question stops the start).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.mcp.conftest import answer
from tests.security.test_fiftyninth_round import ask_restart
from tests.security.test_fortysecond_round import _run_folder

pytestmark = pytest.mark.slow  # real child processes

SHIMS = Path.home() / ".pyenv" / "shims"


@pytest.mark.skipif(not (SHIMS / "python").is_file(), reason="no pyenv shims on this machine")
def test_a_version_file_that_picks_the_shims_interpreter_is_named_in_the_question(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{SHIMS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYENV_VERSION", raising=False)
    run = _run_folder(tmp_path)
    (run / "train.py").write_text("print('train')\n")
    (run / ".python-version").write_text("2.7.18\n")
    (run / "command.txt").write_text("python train.py\n")
    person = answer("decline")
    got = ask_restart(tmp_path, run, person)
    assert person.shown, got
    question = person.shown[0]
    assert ".python-version" in question and "2.7.18" in question and "shim" in question, question


def test_no_version_file_clause_for_a_launcher_that_is_no_shim(tmp_path: Path, monkeypatch) -> None:
    """Control: the server's own interpreter by its real path is no shim; a version file beside it is not mentioned."""
    from ml_skills.policy.folder_routes import version_file_routes

    monkeypatch.delenv("PYENV_VERSION", raising=False)
    (tmp_path / ".python-version").write_text("2.7.18\n")
    assert version_file_routes(tmp_path, os.path.realpath("/usr/bin/env"), [tmp_path]) == []
    assert any(".python-version" in c for c in version_file_routes(tmp_path, str(SHIMS / "python"), [tmp_path]))  # named
    above = version_file_routes(tmp_path / "sub", str(SHIMS / "python"), [tmp_path / "sub"])  # above the root: not read
    assert not any(".python-version" in c for c in above), above
