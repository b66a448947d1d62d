"""Issue 14's seventy-first round: an outside tester's real restarts (a helper session that did not write this code); each
break failed on the code before its fix (docs/security.md, "Seventy-first round").

The sixty-ninth round's PYTHONPATH checks read a `.pth` file's first imported name only (setuptools' `__import__
('_distutils_hack')` and an `exec("import certifi ...")` were missed, and a run-folder `lib/_distutils_hack/` ran at start-up);
looked in an entry outside the run folder for start-up hooks and the standard library only (torchrun's agent imported a
`typing_extensions.py` planted in `../shared`, and `python train.py` whose script imports torch one in `lib/`); walked `..`
as the kernel does while python makes each entry absolute lexically (`nothere/../lib` and `x/../evil` after a link ran what
the check never saw); and let a script hold bidi controls that draw code as part of a string (Trojan Source).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from ml_skills.policy import launcher_stages

from tests.security.test_sixtysixth_round import _assert_all_refused

pytestmark = pytest.mark.slow  # real child processes

# a name a site-packages .pth imports at start-up but no first `import NAME` of its line names, when this environment has one
_PTH_NAMES = sorted(launcher_stages._standard_library() - set(sys.stdlib_module_names))


def _pth_hook(run: Path, planted: str) -> None:
    (run / "train.py").write_text("print('train')\n")
    (run / "lib" / _PTH_NAMES[0]).mkdir(parents=True)
    (run / "lib" / _PTH_NAMES[0] / "__init__.py").write_text(planted)


def _typing_extensions_beside(run: Path, planted: str) -> None:
    (run / "train.py").write_text("print('train')\n")
    shared = run.parent / f"shared-{run.name}"
    shared.mkdir()
    (shared / "typing_extensions.py").write_text(planted)


def _typing_extensions_in_lib(run: Path, planted: str) -> None:
    (run / "train.py").write_text("import torch\nprint('train')\n")
    (run / "lib").mkdir()
    (run / "lib" / "typing_extensions.py").write_text(planted)


def _trojan_source(run: Path, planted: str) -> None:
    (run / "train.py").write_text("def setup():\n    ''' Prepare the run; nothing below runs \u2067''' ;" + planted.strip()
                                  + "\n    return\n\nsetup()\nprint('train')\n", encoding="utf-8")


def _dotdot_after_missing(run: Path, planted: str) -> None:
    (run / "train.py").write_text("print('train')\n")
    (run / "lib").mkdir()
    (run / "lib" / "sitecustomize.py").write_text(planted)


def _dotdot_after_link(run: Path, planted: str) -> None:
    (run / "train.py").write_text("print('train')\n")
    shared = run.parent / f"shared-{run.name}"
    (shared / "evil").mkdir(parents=True)
    (shared / "evil" / "sitecustomize.py").write_text(planted)
    (run.parent / f"elsewhere-{run.name}" / "deep").mkdir(parents=True)
    os.symlink(run.parent / f"elsewhere-{run.name}" / "deep", shared / "x")


CASES = [
    ("torchrun-beside", "PYTHONPATH=../shared-torchrun-beside torchrun --nproc-per-node 1 train.py", _typing_extensions_beside,
     "an installed package's"),
    ("python-lib-torch-dep", "PYTHONPATH=lib python train.py", _typing_extensions_in_lib, "an installed package's"),
    ("trojan-source", "python train.py", _trojan_source, "U+2067"),
    ("dotdot-after-missing", "PYTHONPATH=nothere/../lib python train.py", _dotdot_after_missing, "`..` part"),
    ("dotdot-after-link", "PYTHONPATH=../shared-dotdot-after-link/x/../evil python train.py", _dotdot_after_link, "`..` part"),
]
if _PTH_NAMES:
    CASES.append(("pth-hook", "PYTHONPATH=lib python train.py", _pth_hook, "start-up"))


def test_entries_shadowing_installed_or_start_up_modules_dotted_entries_and_trojan_source_are_refused(tmp_path: Path) -> None:
    _assert_all_refused(tmp_path, CASES)
