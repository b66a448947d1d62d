"""Shapes from the twelfth prospective batch's abstentions (scored before these changes; regression tests now).

- A traceback quoted in an issue whose lines lost a space to the quote marker ('>  File ...', '> XError: ...'):
  Python never indents a line by exactly one space, so that space is the paste's, and the line under the frames
  is the exception (corpus 878, google/flax#1091: Flax's save_checkpoint failing on gfile.rename).
- paddle.distributed.launch's 'ABORT!!! Out of all 4 trainers, the trainer process with rank=[1, 2, 3] was
  aborted' is the launcher's report of failed children, and nccl_context's 'Socket connect worker ... failed, try
  again' a peer that never came up (corpus 876, PaddlePaddle/PaddleClas#727): the run crashed, not 'no error'.
- Ray's raylet '4 Workers (tasks / actors) killed due to memory pressure (OOM)' is the memory monitor's kill
  (corpus 910, flwrlabs/flower#2157); '0 Workers ... killed' is not.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _case(prefix: str) -> str:
    return str(next((TESTS / "corpus").glob(f"{prefix}-*")) / "train.log")


def test_a_quoted_traceback_whose_exception_line_kept_one_space_is_read():
    d = diagnose(DiagnoseRequest(target=_case("878")))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint", d.root_cause
    assert d.run_status.value == "crashed"
    assert "AlreadyExistsError" in d.root_cause.proximate


def test_a_real_traceback_with_one_space_lines_is_still_the_run_s_exception(tmp_path):
    script = tmp_path / "save.py"
    script.write_text(textwrap.dedent("""
        import os
        def save_checkpoint(tmp, final):
            os.rename(tmp, final)
        os.makedirs("ckpt/step_1000", exist_ok=True); os.makedirs("ckpt/tmp", exist_ok=True)
        open("ckpt/step_1000/x", "w").close(); open("ckpt/tmp/x", "w").close()
        save_checkpoint("ckpt/tmp", "ckpt/step_1000")
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert r.returncode == 1 and "OSError" in r.stderr.splitlines()[-1]
    # quoted as corpus 878's issue quoted its log: from the first frame on (no header), '> ' before each line but
    # the first, whose quote marker has no space ('>  File', '>   File', '> OSError: ...')
    lines = r.stderr.splitlines()[1:]
    quoted = ">" + lines[0] + "\n" + "".join("> " + line + "\n" for line in lines[1:])
    log = tmp_path / "train.log"
    log.write_text(quoted)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value == "crashed", quoted
    assert "OSError" in d.root_cause.proximate, d.root_cause


def test_a_launcher_reporting_aborted_trainers_means_the_run_crashed():
    d = diagnose(DiagnoseRequest(target=_case("876")))
    assert d.run_status.value == "crashed"
    assert any("ABORT!!!" in e.text for e in d.evidence), d.evidence


def test_rays_memory_monitor_kill_is_oom():
    d = diagnose(DiagnoseRequest(target=_case("910")))
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.root_cause
