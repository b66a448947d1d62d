"""A segfault reported just below an uncaught exception of the run's own code is how that process exited, not a
second failure (classify/cascades.native_crash_at_exit; batch 25's 1394: Paddle's DataLoader raised on an empty image,
then the interpreter's teardown printed 'FatalError: Segmentation fault'). Real processes crash here at exit through
ctypes after their traceback; the controls are a segfault with no exception before it and one that came after the run
went on training past a logged exception. And pycocotools' 'Results do not correspond to current coco set' is an
evaluation whose predictions are not of the annotation set (1407, 1408)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]

_RUN = """
    import atexit, ctypes, faulthandler, sys
    faulthandler.enable()
    which = sys.argv[1]
    def crash():
        ctypes.string_at(0)  # a native extension's crash as the interpreter exits
    class SBD:
        def __getitem__(self, i):
            image = b""  # cv2.imread gave nothing for this file
            if not image:
                raise ValueError(f"(-215:Assertion failed) !_src.empty() for sample {i}")
            return image
    if which != "no-exception":
        atexit.register(crash)
    for step in range(1, 13):
        print(f"Epoch=1, Step={step}/40001, loss={1.0 / step:.4f}, lr=5e-05", flush=True)
        if which == "after-exception" and step == 3:
            try:
                SBD()[2]
            except ValueError as e:
                print(f"[WARNING] skipping a sample: {e!r}", flush=True)
    if which == "at-exit":
        batch = [SBD()[i] for i in (1, 2)]  # uncaught: the traceback, then the crash at exit
    if which == "no-exception":
        crash()
    if which == "after-exception":
        crash()
"""


def _diagnose_run(tmp_path: Path, which: str) -> tuple[str | None, str]:
    (tmp_path / "train.py").write_text(textwrap.dedent(_RUN), encoding="utf-8")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        subprocess.run(["bash", "-c", f"{sys.executable} train.py {which}"], stdout=out, stderr=subprocess.STDOUT,
                       cwd=tmp_path, check=False, timeout=120)
    text = log.read_text()
    assert "Segmentation fault" in text
    d = diagnose(DiagnoseRequest(target=str(log)))
    return (d.primary_cause.value if d.primary_cause else None), d.run_status.value


def test_a_segfault_at_exit_after_the_runs_own_exception_is_that_exceptions_ending(tmp_path: Path):
    assert _diagnose_run(tmp_path, "at-exit") == ("data-pipeline", "crashed")


@pytest.mark.parametrize("which", ["no-exception", "after-exception"])
def test_a_segfault_with_no_uncaught_exception_before_it_is_the_crash(tmp_path: Path, which: str):
    assert _diagnose_run(tmp_path, which) == ("process-crash", "crashed")


def test_paddle_teardown_segfault_after_the_data_readers_exception():
    """Verbatim committed workerlog (tests/corpus/1394-*/case.json cites it)."""
    log = next((TESTS / "corpus").glob("1394-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "data-pipeline"


@pytest.mark.parametrize("n", ["1407", "1408"])
def test_coco_results_not_of_the_annotation_set_are_an_evaluation_mismatch(n: str):
    """Verbatim issue-thread logs (tests/corpus/{1407,1408}-*/case.json cite them)."""
    log = next((TESTS / "corpus").glob(f"{n}-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch"
