"""Issue 14's sixty-ninth round: an outside tester's real restarts (a helper session that did not write this code); each
break failed on the code before its fix (docs/security.md, "Sixty-ninth round").

A recorded PYTHONPATH entry was checked only when it resolved into the run folder, and only for a launcher's package or
sitecustomize: a zip archive holding sitecustomize.py, a link in the run folder to a folder outside it, a folder holding
`encodings/` (python looks the standard library up after PYTHONPATH) and `/proc/self/cwd/lib` (the server's working folder when
checked, the run folder when run) each ran a planted module after an accept. A script of Python 2.7 bytecode (magic 62211,
outside the 3.x range checked) ran under a pinned 2.7, as did a declared encoding this Python does not know. A carriage return
alone inside a comment ran the rest of the line (the docs did not promise it: a gap, closed). An entry outside the run folder
holding sitecustomize.py ran it (a gap, closed).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.security.test_sixtysixth_round import _assert_all_refused, _restart_all

pytestmark = pytest.mark.slow  # real child processes


def _zip_on_pythonpath(run: Path, planted: str) -> None:
    import zipfile

    (run / "train.py").write_text("print('train')\n")
    with zipfile.ZipFile(run / "deps.zip", "w") as z:
        z.writestr("sitecustomize.py", planted)


def _link_out(hook: str):
    def setup(run: Path, planted: str) -> None:
        (run / "train.py").write_text("print('train')\n")
        outside = run.parents[1] / f"outside-{run.name}"  # beside the allowed root
        outside.mkdir()
        (outside / hook).write_text(planted)
        os.symlink(outside, run / "lib")
    return setup


def _stdlib_shadow(run: Path, planted: str) -> None:
    (run / "train.py").write_text("print('train')\n")
    (run / "lib" / "encodings").mkdir(parents=True)
    # the planted package records itself, then hands over to the real one so python can go on starting
    (run / "lib" / "encodings" / "__init__.py").write_text(
        planted + "import sys, importlib.util, sysconfig\n"
        "spec = importlib.util.spec_from_file_location('encodings', sysconfig.get_paths()['stdlib'] + '/encodings/__init__.py')\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['encodings'] = m; spec.loader.exec_module(m)\n")


def _proc_cwd(hook: str):
    def setup(run: Path, planted: str) -> None:
        (run / "train.py").write_text("print('train')\n")
        (run / "lib").mkdir()
        (run / "lib" / hook).write_text(planted)
    return setup


def _py27_bytecode(run: Path, planted: str) -> None:
    (run / "train.py").write_bytes(b"\x03\xf3\r\n" + b"\x00" * 4 + b"c" + planted.encode())


def _unknown_encoding(run: Path, planted: str) -> None:
    (run / "train.py").write_bytes(b"# -*- coding: unicode_internal -*-\n" + ("print('train')\n" + planted).encode("utf-32-le"))


def _lone_cr(run: Path, planted: str) -> None:
    (run / "train.py").write_bytes(b"print('train')\n# TODO: tune lr\r" + planted.strip().encode() + b"\n")


def _beside_the_run_folder(run: Path, planted: str) -> None:
    (run / "train.py").write_text("print('train')\n")
    shared = run.parent / f"shared-{run.name}"
    shared.mkdir()
    (shared / "sitecustomize.py").write_text(planted)


CASES = [
    ("zip-entry", "PYTHONPATH=deps.zip python train.py", _zip_on_pythonpath, "not a folder"),
    ("link-out-python", "PYTHONPATH=lib python train.py", _link_out("sitecustomize.py"), "a link in the run folder"),
    ("link-out-torchrun", "PYTHONPATH=lib torchrun --nproc-per-node 1 train.py", _link_out("typing_extensions.py"),
     "a link in the run folder"),
    ("stdlib-shadow", "PYTHONPATH=lib python train.py", _stdlib_shadow, "in place of the module"),
    ("proc-cwd-python", "PYTHONPATH=/proc/self/cwd/lib python train.py", _proc_cwd("sitecustomize.py"), "in each process"),
    ("proc-cwd-torchrun", "PYTHONPATH=/proc/self/cwd/lib torchrun --nproc-per-node 1 train.py",
     _proc_cwd("typing_extensions.py"), "in each process"),
    ("py27-bytecode", "python train.py", _py27_bytecode, "compiled bytecode"),
    ("unknown-encoding", "python train.py", _unknown_encoding, "source encoding"),
    ("lone-cr", "python train.py", _lone_cr, "carriage return alone"),
    ("beside", "PYTHONPATH=../shared-beside python train.py", _beside_the_run_folder, "start-up hook"),
]


def test_pythonpath_entries_and_scripts_that_load_code_the_line_does_not_show_are_refused(tmp_path: Path) -> None:
    _assert_all_refused(tmp_path, CASES)


def test_a_run_folders_own_source_folder_on_pythonpath_still_restarts(tmp_path: Path) -> None:
    """The fixes read modules as python imports them: a source folder of the run's own packages (`src/model/`, a `data.json`
    beside them) is no standard-library name, and runs."""
    def own(run: Path, planted: str) -> None:
        (run / "src" / "model").mkdir(parents=True)
        (run / "src" / "model" / "__init__.py").write_text(planted)
        (run / "src" / "json.txt").write_text("{}\n")  # named like a module, but no file python imports
        (run / "train.py").write_text("import model\n")

    got = _restart_all(tmp_path, [("own", "PYTHONPATH=src python train.py", own, "")])
    out, marker = got["own"]
    for _ in range(40):
        if marker.exists():
            break
        time.sleep(0.5)
    assert marker.exists(), out
