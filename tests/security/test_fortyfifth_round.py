"""Issue 14's forty-fifth round, inside (written by the lead before the outside round, from the forty-fourth's list of
what the allow-lists still admitted): each attack failed on the code before its fix (docs/security.md, "Forty-fifth round").

torchrun's own options were not allow-listed. `torchrun --run-path train.py` starts its worker through multiprocessing's
spawn bootstrap, `python -c 'from multiprocessing.spawn import ...'` in the run folder, where `-c` puts the folder first on
the import path: a planted `multiprocessing/` package ran after an accept (real torchrun, below). `--logs-specs` names an
entry point torchrun loads, `--event-log-handler` a handler, and argparse takes any unique prefix of each (`--logs`,
`--run_p`). python's own options were judged one by one (`-X pycache_prefix`, `-m`): `-X presite=` (a module imported
before site on a debug build), `-i` and `-x` passed. And srun, mpirun and horovodrun, whose allow-lists three rounds had
passed, are no longer restarted at all.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, answer, text
from tests.security.test_fortysecond_round import _run_folder, _stand_ins
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes


def _restart(tmp_path: Path, line: str) -> str:
    """Record `line` in the run folder (its train.py as the test wrote it) and ask for the restart, accepting."""
    run = _run_folder(tmp_path)
    (run / "command.txt").write_text(line + "\n")
    got: list[str] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[tmp_path / "root"]).client(elicit=answer("accept")) as c:
            got.append(text(await c.call_tool("request_action", {"action": {"kind": "restart-unchanged",
                                                                              "command_file": str(run / "command.txt")}})))

    anyio.run(go)
    return got[0]


def test_torchrun_run_path_never_imports_a_package_planted_in_the_run_folder(tmp_path: Path) -> None:
    """Real torchrun: with `--run-path` its worker's spawn bootstrap imported the run folder's `multiprocessing/`."""
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    (run / "multiprocessing").mkdir()
    (run / "multiprocessing" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('planted')\nraise SystemExit(3)\n")
    (run / "train.py").write_text("print('train')\n")
    got = _restart(tmp_path, "torchrun --nproc-per-node 1 --run-path train.py")
    time.sleep(8)
    assert not marker.exists(), got
    assert "not restarted" in got and "--run-path" in got, got


@pytest.mark.parametrize("line", [
    "torchrun --logs-specs evil train.py",
    "torchrun --logs=evil train.py",
    "torchrun --run_p train.py",
    "torchrun --event-log-handler evil train.py",
    "torchrun --nproc-per-node 1 --frobnicate 1 train.py",
    "torchrun --log-dir --logs-specs=evil train.py",
    "torchrun -mh train.py",
    "torchrun --standalone=1 train.py",
    "PET_LOGS_SPECS=evil torchrun train.py",
    "python -X presite=evil train.py",
    "python -i train.py",
    "python -x train.py",
    "python -uX presite=evil train.py",
    "python --check-hash-based-pycs=never train.py",
    "python --frobnicate train.py",
    "srun -N 1 -J myjob python train.py",
    "mpirun -np 1 python train.py",
    "horovodrun -np 1 python train.py",
])
def test_a_launcher_option_not_known_to_place_or_tune_the_run_is_refused(tmp_path: Path, monkeypatch, line: str) -> None:
    started = _stand_ins(tmp_path, monkeypatch)  # torchrun, srun, mpirun, horovodrun stand-ins that record their start
    (_run_folder(tmp_path) / "train.py").write_text(f"open({str(tmp_path / 'RAN')!r}, 'w').write('ran')\n")
    got = _restart(tmp_path, line)
    _wait_for(started, 2)
    assert not started.exists() and not (tmp_path / "RAN").exists(), got
    assert "not restarted" in got, got


def test_pythons_tuning_options_still_restart(tmp_path: Path) -> None:
    """Control: the interpreter options a launch line carries run, with the real interpreter."""
    ran = tmp_path / "RAN"
    (_run_folder(tmp_path) / "train.py").write_text(f"import sys\nopen({str(ran)!r}, 'w').write(repr(sys.flags.optimize))\n")
    got = _restart(tmp_path, "python -u -B -O -X faulthandler -Xutf8 -W ignore --check-hash-based-pycs never train.py --lr 3")
    _wait_for(ran)
    assert ran.read_text() == "1", got
