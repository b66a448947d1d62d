"""A log that stops where torch's JIT extension build waits on its lock file is a hang, said with a stop's low
confidence: every process but the one compiling waits on the build directory's 'lock', and a lock left behind by a
killed build makes them all wait forever (corpus 832, 833: DeepSpeed/OpenRLHF and nvdiffrec runs stuck after 'Using
... as PyTorch extensions root...', read as undetermined).

A real process: torch.utils.cpp_extension.load() with a stale lock in its build directory, stopped after 8 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")

LOAD = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    import torch.utils.cpp_extension as cpp
    cpp.logger.setLevel(logging.INFO)  # torch keeps its own loggers at WARNING; older releases printed this line
    cpp.load("fused_adam", [sys.argv[1]], verbose=True)
""")


@pytest.mark.slow
def test_a_log_stopped_at_a_stale_build_lock_reads_as_a_hang(tmp_path: Path) -> None:
    if shutil.which("ninja") is None:
        pytest.skip("torch's JIT build needs ninja before it takes the lock")
    src = tmp_path / "fused_adam.cpp"
    src.write_text("int fused_adam_placeholder;\n")
    ext = tmp_path / "torch_extensions"
    (ext / "fused_adam").mkdir(parents=True)
    (ext / "fused_adam" / "lock").touch()  # left by a build that was killed
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-u", "-c", LOAD, str(src)], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "TORCH_EXTENSIONS_DIR": str(ext)})
        try:
            proc.wait(timeout=8)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "as PyTorch extensions root" in log.read_text(), log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled"
    assert d.primary_cause_confidence <= 0.45
