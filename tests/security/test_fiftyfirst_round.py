"""Issue 14's fifty-first round: an outside tester's real restarts (a helper session that did not write this code); the
break fixed here failed on the code before its fix (docs/security.md, "Fifty-first round").

`python -X frozen_modules=off train.py` was admitted as an interpreter option: with it, the standard modules CPython keeps
frozen (runpy among them) are imported through sys.path, where the run folder comes first, so a `runpy.py` planted beside
the script ran when torch imported runpy, though the same line without the option never loads it (real interpreter).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.security.test_fortyfifth_round import _restart
from tests.security.test_fortysecond_round import _run_folder

pytestmark = pytest.mark.slow  # real child processes


@pytest.mark.parametrize("option", ["-X frozen_modules=off", "-Xfrozen_modules=off", "-uX frozen_modules=off"])
def test_python_never_imports_its_frozen_modules_from_the_run_folder(tmp_path: Path, option: str) -> None:
    run = _run_folder(tmp_path)
    marker, ran = tmp_path / "PWNED", tmp_path / "RAN"
    (run / "runpy.py").write_text(f"open({str(marker)!r}, 'w').write('planted runpy')\n")
    (run / "train.py").write_text(f"import runpy\nopen({str(ran)!r}, 'w').write('ran')\n")
    got = _restart(tmp_path, f"python {option} train.py")
    time.sleep(3)
    assert not marker.exists() and not ran.exists(), got
    assert "not restarted" in got and "frozen_modules" in got, got
