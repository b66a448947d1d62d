"""Issue 14's sixty-fourth round: an outside tester's real restarts (a helper session that did not write this code); each
break failed on the code before its fix (docs/security.md, "Sixty-fourth round").

A recorded line is refused when it holds shell syntax, since it runs as one argument list while the answer's manual line
runs in a shell; the check knew `$VAR`, `${`, `$(` and backticks, not bash's `$"..."`, `$'...'` or the special parameters
`$@ $$ $- $# $!`: `python $"train.py"` ran a planted `$train.py` (bash runs `train.py`), and `PYTHONPATH=$@/opt/ml/lib`
(bash reads `/opt/ml/lib`) named a folder of the run folder whose sitecustomize.py ran in torchrun's agent. And the
PYTHONPATH the server inherited was passed to the restart as it was: started with `PYTHONPATH=:/opt/x` (what `export
PYTHONPATH=$PYTHONPATH:/opt/x` leaves when it was empty), the empty entry was the run folder in the child.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.security.test_fortyfifth_round import _restart
from tests.security.test_fortysecond_round import _run_folder

pytestmark = pytest.mark.slow  # real child processes


def _sitecustomize(folder: Path, marker: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'a').write('planted ')\n")


@pytest.mark.parametrize("line, planted", [
    ('python $"train.py"', "$train.py"), ("python $'train.py'", "$train.py"), ("python train.py$$", "train.py$$"),
    ("PYTHONPATH=$@/opt/ml/lib python train.py", "$@/opt/ml/lib/sitecustomize.py"),
    ('PYTHONPATH=$"/usr/lib/python3/dist-packages" python train.py', "$/usr/lib/python3/dist-packages/sitecustomize.py"),
])
def test_a_dollar_form_bash_expands_is_refused(tmp_path: Path, line: str, planted: str) -> None:
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    (run / planted).parent.mkdir(parents=True, exist_ok=True)
    (run / planted).write_text(f"open({str(marker)!r}, 'a').write('planted ')\n")
    got = _restart(tmp_path, line)
    time.sleep(3)
    assert not marker.exists(), got
    assert "not restarted" in got and "shell expansion" in got, got


@pytest.mark.parametrize("inherited", [":{here}", "{here}:", "lib:{here}"])
def test_the_servers_own_pythonpath_never_names_the_run_folder(tmp_path: Path, monkeypatch, inherited: str) -> None:
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    _sitecustomize(run, marker)
    _sitecustomize(run / "lib", marker)
    here = os.environ.get("PYTHONPATH") or str(Path(__file__).resolve().parents[2] / "server")
    monkeypatch.setenv("PYTHONPATH", inherited.format(here=here))
    ran = tmp_path / "RAN"
    got = _restart(tmp_path, f"python -c \"open({str(ran)!r}, 'w').write('ran')\"")
    for _ in range(40):
        if ran.exists():
            break
        time.sleep(0.5)
    assert ran.exists(), got  # the restart ran, with the server's absolute entries only
    assert not marker.exists(), got
