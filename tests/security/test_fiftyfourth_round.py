"""Issue 14's fifty-fourth round: an outside tester's real restarts (a helper session that did not write this code); each
break failed on the code before its fix (docs/security.md, "Fifty-fourth round").

`python -W ignore::unittest.__main__.X train.py` (and the same filter in `PYTHONWARNINGS`): CPython imports a warning
category's module at start-up to find the class, and unittest's `__main__` has no main guard, so its test discovery ran a
`test_*.py` planted in the run folder, and train.py never ran (real interpreter). And bash's ANSI-C quoting
(`export AWS_SECRET_ACCESS_KEY=$'X'`, as `bash -v` echoes a launch script) kept the secret in clear.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.security import fakes
from tests.security.test_fiftythird_round import _shown
from tests.security.test_fortyfifth_round import _restart
from tests.security.test_fortysecond_round import _run_folder

pytestmark = pytest.mark.slow  # real child processes


@pytest.mark.parametrize("line", ["python -W ignore::unittest.__main__.X train.py",
                                  "python -Werror::unittest.__main__.X train.py",
                                  "PYTHONWARNINGS=default,ignore::unittest.__main__.X python train.py"])
def test_a_warning_filter_never_imports_a_module_that_runs_code_of_the_run_folder(tmp_path: Path, line: str) -> None:
    got = restart_beside_a_planted_test_module(tmp_path, line)
    assert "not restarted" in got and "warning" in got, got


def restart_beside_a_planted_test_module(tmp_path: Path, line: str) -> str:
    """Restart `line` (accepted) in a run folder holding a `test_planted.py` that unittest's discovery would import; the
    answer, once the planted module has provably not run."""
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    (run / "test_planted.py").write_text(f"open({str(marker)!r}, 'w').write('planted test module')\n")
    (run / "train.py").write_text("print('train')\n")
    got = _restart(tmp_path, line)
    time.sleep(5)
    assert not marker.exists(), got
    return got


def test_a_warning_filter_of_pythons_own_categories_still_restarts(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    ran = tmp_path / "RAN"
    (run / "train.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    got = _restart(tmp_path, "PYTHONWARNINGS=ignore::DeprecationWarning python -W error::RuntimeWarning train.py")
    for _ in range(40):
        if ran.exists():
            break
        time.sleep(0.5)
    assert ran.exists() and "started pid" in got, got


def test_a_secret_in_bashs_ansi_c_quotes_never_leaves(tmp_path: Path) -> None:
    """`bash -v` echoes a launch script that exports a secret in `$'...'` quotes (real bash)."""
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True)
    secret = fakes.aws_secret().replace("/", "x").replace("+", "y")
    (run / "train.sh").write_text(f"export AWS_SECRET_ACCESS_KEY=$'{secret}'\necho 'step 1 loss nan'\n"
                                  "echo 'FloatingPointError: loss is nan'\n")
    with (run / "train.log").open("w") as log:
        subprocess.run(["bash", "-v", "train.sh"], cwd=run, stdout=log, stderr=subprocess.STDOUT, timeout=60, check=False)
    assert secret in (run / "train.log").read_text()
    shown = _shown(tmp_path, run, [("read_log_tail", {}), ("grep_log", {"pattern": "."})])
    assert not any(secret[:16] in s for s in shown)
