"""Issue 14's fiftieth round: an outside tester's real restarts (a helper session that did not write this code), driven
over stdio with a real MCP client that accepts; each failed on the code before its fix (docs/security.md, "Fiftieth round").

A mask in the restart question may hide only a plain value (thirteenth round), but it was never asked whose value: a folder
and a script named like a token (`PYTHONPATH=hf_...`, `python hf_....py`) were shown as `[REDACTED]`, and after the accept
the folder's `sitecustomize.py` and the hidden script ran. A mask may now hide only the value of a variable or an option
named for a secret.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.security.test_fortyfifth_round import _restart
from tests.security.test_fortysecond_round import _run_folder
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes

TOKEN_NAME = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def test_a_folder_named_like_a_token_is_never_a_hidden_pythonpath(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    (run / TOKEN_NAME).mkdir()
    (run / TOKEN_NAME / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('planted')\n")
    (run / "train.py").write_text("print('train')\n")
    got = _restart(tmp_path, f"PYTHONPATH={TOKEN_NAME} python train.py")
    time.sleep(3)
    assert not marker.exists(), got
    assert "not restarted" in got and "not the value of a secret" in got, got


def test_a_script_named_like_a_token_is_never_run_hidden(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    (run / f"{TOKEN_NAME}.py").write_text(f"open({str(marker)!r}, 'w').write('hidden script')\n")
    got = _restart(tmp_path, f"python {TOKEN_NAME}.py")
    time.sleep(3)
    assert not marker.exists(), got
    assert "not restarted" in got, got


@pytest.mark.parametrize("line", [f"HF_TOKEN={TOKEN_NAME} python train.py", f"python train.py --hub_token {TOKEN_NAME}",
                                  f"python train.py --hub_token={TOKEN_NAME}"])
def test_a_secrets_value_is_still_hidden_and_the_run_restarts(tmp_path: Path, line: str) -> None:
    """Control: a token given as a secret's variable or option is masked in the question, and the run starts."""
    ran = tmp_path / "RAN"
    (_run_folder(tmp_path) / "train.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    got = _restart(tmp_path, line)
    _wait_for(ran)
    assert ran.exists(), got
    assert TOKEN_NAME not in got, got
