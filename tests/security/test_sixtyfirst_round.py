"""Issue 14's sixty-first round: an outside tester's real restarts (a helper session that did not write this code); each
break failed on the code before its fix (docs/security.md, "Sixty-first round").

`-m MODULE` ran "only the run folder's own module", but the interpreter looks the module up by name when it starts, after
every check: `python -I -m unittest` (or `-P`, or `PYTHONSAFEPATH=1`, inherited by torchrun's worker) left the run folder off
the path, so the standard library's unittest ran and its discovery imported a planted `test_planted.py`; the folder's own
`unittest.py` deleted after the server's last check did the same (5 of 5). A module is no longer restarted at all. And
`--log-dir logs`, a link in the run folder, sent torchrun's worker logs outside the roots (a gap round 60 had closed for
`--rdzv-id`): the log folder is now plain names below the run folder, with no link on the way.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.security.test_fortyfifth_round import _restart
from tests.security.test_fortysecond_round import _run_folder

pytestmark = pytest.mark.slow  # real child processes


def _planted_unittest(run: Path, tmp_path: Path) -> Path:
    """The run folder's own unittest.py, and a test module the standard library's unittest would discover beside it."""
    planted = tmp_path / "PLANTED_RAN"
    (run / "unittest.py").write_text("print('own')\n")
    (run / "test_planted.py").write_text(f"open({str(planted)!r}, 'w').write('planted')\n")
    return planted


@pytest.mark.parametrize("line", ["python -I -m unittest", "python -P -m unittest", "PYTHONSAFEPATH=1 python -u -m unittest",
                                  "PYTHONSAFEPATH=1 torchrun --standalone --nproc-per-node 1 -m unittest",
                                  "torchrun --standalone --nproc-per-node 1 --mod unittest"])
def test_a_module_run_by_name_is_never_restarted(tmp_path: Path, line: str) -> None:
    run = _run_folder(tmp_path)
    planted = _planted_unittest(run, tmp_path)
    got = _restart(tmp_path, line)
    time.sleep(4)
    assert not planted.exists(), got
    assert "not restarted" in got and "runs a module by name" in got, got


@pytest.mark.parametrize("log_dir", ["logs", "logs/inner", "/tmp/elsewhere", "../x"])
def test_torchruns_log_folder_never_leads_outside_the_run_folder(tmp_path: Path, log_dir: str) -> None:
    run = _run_folder(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (run / "logs").symlink_to(outside)
    got = _restart(tmp_path, f"torchrun --standalone --nproc-per-node 1 --log-dir {log_dir} --redirects 3 train.py")
    time.sleep(3)
    assert not any(outside.iterdir()), got
    assert "not restarted" in got and "--log-dir" in got, got


def test_a_plain_log_folder_of_the_run_folder_still_restarts(tmp_path: Path) -> None:
    """Control: real torchrun writes the workers' logs below the run folder's own `logs/`."""
    pytest.importorskip("torch")
    run = _run_folder(tmp_path)
    (run / "train.py").write_text("print('train')\n")
    got = _restart(tmp_path, "torchrun --standalone --nproc-per-node 1 --log-dir logs/a --redirects 3 train.py")
    for _ in range(60):
        if list((run / "logs").rglob("stdout.log")):
            break
        time.sleep(0.5)
    assert "started pid" in got and list((run / "logs").rglob("stdout.log")), got
