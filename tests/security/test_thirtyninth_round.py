"""Issue 14's thirty-ninth round: an outside tester's attacks (a helper session that did not write this code). Each
test drives the server over stdio with a real MCP client and real child processes; each failed on the code before its
fix (docs/security.md, "Thirty-ninth round"): two evidence tools started `nvidia-smi` and `ssh` by name on the server's
whole PATH, so a relative entry ('bin', or the empty one a trailing ':' leaves) ran a file of that name from the server's
working folder, usually the run folder, with no one asked; and `TORCH_HOME=cache python train.py` made torch.hub import
a planted hubconf.py after an accept (a recorded line may now set only variables known to tune a run)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mcp.conftest import Server, call_once
from tests.security.test_ninth_round import _wait_for
from tests.security.test_thirtyeighth_round import _restart

pytestmark = pytest.mark.slow  # real child processes


def _plant(folder: Path, names: tuple[str, ...], marker: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        p = folder / name
        p.write_text(f"#!/bin/sh\necho {name} >> {marker}\nexit 1\n")
        p.chmod(0o755)


@pytest.mark.parametrize("path_form", ["bin:{PATH}", "{PATH}:"])
def test_evidence_tools_never_start_a_program_from_the_working_folder(tmp_path: Path, monkeypatch, path_form: str) -> None:
    """Promises 1 and 2: the server's working folder (tmp_path) holds `nvidia-smi` and `ssh` scripts, in bin/ and at
    its top; PATH starts with a relative 'bin' or ends with ':'. check_process and read_remote_log ran them."""
    marker = tmp_path / "PWNED"
    _plant(tmp_path, ("nvidia-smi", "ssh"), marker)
    _plant(tmp_path / "bin", ("nvidia-smi", "ssh"), marker)
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv("PATH", path_form.format(PATH=os.environ["PATH"]))
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        srv = Server(tmp_path, roots=[root])
        call_once(srv, "check_process", {"pid": victim.pid, "sample_seconds": 0.5})
        call_once(srv, "read_remote_log", {"target": "u@127.0.0.1:/tmp/x.log"})
    finally:
        victim.kill()
        victim.wait()
    time.sleep(0.5)
    assert not marker.exists(), marker.read_text()


def test_a_recorded_line_setting_a_code_cache_folder_is_refused(tmp_path: Path) -> None:
    """Promise 2: `TORCH_HOME=cache python train.py`, train.py calling torch.hub.load on a repo whose cached copy, a
    hubconf.py planted under cache/hub/, wrote a marker; the person accepts. It ran (torch.hub's 'Using cache found')."""
    pytest.importorskip("torch")
    run = tmp_path / "root" / "run"
    hub = run / "cache" / "hub" / "pytorch_vision_v0.10.0"
    hub.mkdir(parents=True)
    marker = tmp_path / "PWNED"
    hub.joinpath("hubconf.py").write_text(f"open({str(marker)!r}, 'w').write('hub')\ndef resnet18(**kw):\n    return None\n")
    (run / "train.py").write_text("import torch\ntorch.hub.load('pytorch/vision:v0.10.0', 'resnet18', trust_repo=True)\n")
    (run / "command.txt").write_text("TORCH_HOME=cache python train.py\n")
    got = [_restart(tmp_path, run)]
    _wait_for(marker, 20)
    assert not marker.exists(), got
    assert "TORCH_HOME" in got[0] and "known only to tune a run" in got[0], got


def test_a_recorded_line_setting_only_tuning_variables_still_restarts(tmp_path: Path) -> None:
    """Control: devices, threads and logging are set as recorded, and the launch runs after the accept."""
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True)
    done = tmp_path / "TRAINED"
    (run / "train.py").write_text(f"import os\nopen({str(done)!r}, 'w').write(os.environ['OMP_NUM_THREADS'])\n")
    (run / "command.txt").write_text("CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=2 NCCL_DEBUG=INFO TOKENIZERS_PARALLELISM=false python train.py\n")
    got = [_restart(tmp_path, run)]
    _wait_for(done)
    assert done.exists() and done.read_text() == "2", got
