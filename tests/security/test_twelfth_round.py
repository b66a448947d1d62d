"""Issue 14's twelfth round: attacks from outside beside the eleventh round's fixes (the restart's refused variables,
redaction of the kinds docs/security.md lists, the stores' caps) and at the gaps it listed as not promised.

Each test is one attack that broke a claim of docs/security.md, or a listed gap now closed, driven through the real CLI
in a child process or a real MCP client over stdio, with real files; each failed on the code before its fix (see
docs/security.md, "Twelfth round").
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.mcp.conftest import Server

pytestmark = pytest.mark.slow  # real child processes and servers

def test_a_recorded_command_never_names_a_toolkit_or_another_runtime_a_library_starts(tmp_path: Path) -> None:
    """`CUDA_HOME=. python train.py` reads as a launch with a CUDA setting, but torch's extension builds run
    `$CUDA_HOME/bin/nvcc` (the eleventh round listed it as shown, not refused); `TRITON_HOME=.` moves Triton's kernel cache
    without naming it; `JAVA_TOOL_OPTIONS=-agentpath:./x.so` loads a library into the JVM PySpark starts; `NCCL_CONF_FILE`
    is a file of NCCL variables, its plugins among them; `NODE_OPTIONS=--require=./x.js` runs a file in any node a library
    starts. Before: each ran after an accept. Now refused; `CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=1` still runs."""
    from tests.mcp.conftest import answer
    from tests.security.test_ninth_round import _restarts, _wait_for

    r, o = tmp_path / "root", tmp_path / "outside"
    run = r / "run"
    run.mkdir(parents=True)
    o.mkdir()
    (run / "train.py").write_text(f"import os\nopen({str(o / 'RAN')!r}, 'a').write(os.environ.get('CUDA_HOME', '-') + '\\n')\n")
    lines = ["CUDA_HOME=. python train.py", "TRITON_HOME=. python train.py", "JAVA_TOOL_OPTIONS=-agentpath:./x.so python train.py",
             "NCCL_CONF_FILE=./nccl.conf python train.py", "NODE_OPTIONS=--require=./x.js python train.py", "ROCM_PATH=. python train.py",
             "CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=1 python train.py"]
    got = _restarts(Server(tmp_path, roots=[r]), run / "command.txt", lines, answer("accept"))
    _wait_for(o / "RAN")
    time.sleep(1)  # a refused launch that started anyway would have written its line by now
    assert all("error" in g or g.get("ran") is False for g in got[:6]), got
    assert got[6].get("ran") is True, got[6]
    assert (o / "RAN").read_text() == "-\n"
