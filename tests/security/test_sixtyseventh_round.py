"""Issue 14's sixty-seventh round: an outside tester's real restarts (a helper session that did not write this code); each
break failed on the code before its fix (docs/security.md, "Sixty-seventh round").

The sixty-sixth round refused a script declaring a source encoding such as utf-7, reading its first two lines split on `\\n`
from its first 4,096 bytes: a lone `\\r` (which CPython's tokenizer ends a line at) made the declaration the second line,
unseen, and a first line of 5,000 characters pushed it out of view; the utf-7 "comment" ran. And it refused a recorded
PYTHONPATH entry of the run folder only when it held `torch/` (or deepspeed, accelerate): torchrun's agent imports what torch
imports, and a planted `lib/typing_extensions.py` ran in the launcher itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.test_sixtysixth_round import _assert_all_refused

pytestmark = pytest.mark.slow  # real child processes


def _utf7_after_cr(run: Path, planted: str) -> None:
    (run / "train.py").write_bytes(b"\r# -*- coding: utf-7 -*-\nprint('train')\n# c +AAo-" + planted.strip().encode() + b"\n")


def _utf7_after_long_line(run: Path, planted: str) -> None:
    (run / "train.py").write_bytes(b"#" + b"=" * 5000 + b"\n# -*- coding: utf-7 -*-\nprint('train')\n# c +AAo-"
                                   + planted.strip().encode() + b"\n")


def _typing_extensions_on_pythonpath(run: Path, planted: str) -> None:
    (run / "train.py").write_text("print('train')\n")
    (run / "lib").mkdir()
    (run / "lib" / "typing_extensions.py").write_text(planted)


def _sitecustomize_on_pythonpath(run: Path, planted: str) -> None:
    (run / "train.py").write_text("print('train')\n")
    (run / "lib").mkdir()
    (run / "lib" / "sitecustomize.py").write_text(planted)


CASES = [
    ("utf7-after-cr", "python train.py", _utf7_after_cr, "source encoding"),
    ("utf7-after-long-line", "python train.py", _utf7_after_long_line, "source encoding"),
    ("torchrun-pythonpath", "PYTHONPATH=lib torchrun --nproc-per-node 1 train.py", _typing_extensions_on_pythonpath,
     "torchrun's agent"),
    ("python-sitecustomize", "PYTHONPATH=lib python train.py", _sitecustomize_on_pythonpath, "start-up"),
]


def test_an_encoding_declared_past_a_lone_cr_or_a_long_line_and_a_run_folder_pythonpath_under_torchrun_are_refused(
        tmp_path: Path) -> None:
    _assert_all_refused(tmp_path, CASES)
