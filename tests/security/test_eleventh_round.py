"""Issue 14's eleventh round: attacks from outside beside the tenth round's fixes (the restart's variables, redaction of
the kinds docs/security.md lists) and at the gaps it listed.

Each test is one attack that broke a claim of docs/security.md, driven through the real CLI in a child process or a real
MCP client over stdio, with real files; each failed on the code before its fix (see docs/security.md, "Eleventh round").
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mcp.conftest import Server

pytestmark = pytest.mark.slow  # real child processes and servers

_GIT = "/usr/bin/git"


@pytest.mark.skipif(not os.access(_GIT, os.X_OK), reason="needs git for GitPython to start")
def test_a_recorded_command_never_names_a_program_a_library_the_script_imports_will_start(tmp_path: Path) -> None:
    """`GIT_PYTHON_GIT_EXECUTABLE=./x python train.py` reads as a launch with a git setting, and train.py is harmless:
    it imports GitPython, as `wandb.init` and MLflow's run tagging do. GitPython runs that program (`x version`) as it is
    imported. Before: after the accept ./x ran; the tenth round refused OpenSSL's and plugin variables, not the programs
    a library starts. Now refused, with git's other variables, CUDA's injection library and gcc's program folder
    (COMPILER_PATH=. runs ./cc1plus when torch.compile builds a kernel); `OMP_NUM_THREADS=1` still runs."""
    pytest.importorskip("git")
    from tests.mcp.conftest import answer
    from tests.security.test_ninth_round import _restarts, _wait_for

    r, o = tmp_path / "root", tmp_path / "outside"
    run = r / "run"
    run.mkdir(parents=True)
    o.mkdir()
    pwned = o / "PWNED"
    (run / "x").write_text(f"#!/bin/sh\necho ran >> {pwned}\nexec {_GIT} \"$@\"\n")
    (run / "x").chmod(0o755)
    (run / "train.py").write_text(f"import git\nopen({str(o / 'REAL')!r}, 'a').write('ran\\n')\n")
    subprocess.run([sys.executable, "train.py"], cwd=run, env={**os.environ, "GIT_PYTHON_GIT_EXECUTABLE": "./x"}, check=True,
                   timeout=60)
    assert pwned.exists()  # control: the planted program is live
    pwned.unlink()
    (o / "REAL").unlink()
    lines = ["GIT_PYTHON_GIT_EXECUTABLE=./x python train.py", "GIT_SSH_COMMAND=./x python train.py",
             "CUDA_INJECTION64_PATH=./x python train.py", "COMPILER_PATH=. python train.py",
             "OMP_NUM_THREADS=1 python train.py"]
    got = _restarts(Server(tmp_path, roots=[r]), run / "command.txt", lines, answer("accept"))
    _wait_for(o / "REAL")
    time.sleep(1)  # a refused launch that started anyway would have written its marker by now
    assert not pwned.exists(), (pwned.read_text(), got)
    assert all("error" in g or g.get("ran") is False for g in got[:4]), got
    assert got[4].get("ran") is True, got[4]
