"""Issue 14's forty-seventh round: an outside tester's attacks (a helper session that did not write this code), driven over
stdio with a real MCP client; each failed on the code before its fix (docs/security.md, "Forty-seventh round").

A `PYTHONPATH` with an empty entry (`PYTHONPATH=/opt/site-extra: python train.py`) is the working folder to Python, the run
folder here, shown as nothing: a planted `sitecustomize.py` ran at start-up after an accept (real interpreter). And a
URL-encoded letter inside a name (`?pass%77ord=X`) hid the keyword from every pattern, as a JSON escape did before the
sixteenth round.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.security.test_eleventh_round import _shown_over_mcp
from tests.security.test_fortyfifth_round import _restart
from tests.security.test_fortysecond_round import _run_folder
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes


@pytest.mark.parametrize("value", ["/opt/site-extra:", ":/opt/site-extra", "/opt/a::/opt/b", ""])
def test_a_pythonpath_with_an_empty_entry_never_runs_the_run_folders_sitecustomize(tmp_path: Path, value: str) -> None:
    run = _run_folder(tmp_path)
    marker, ran = tmp_path / "PWNED", tmp_path / "RAN"
    (run / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('planted')\n")
    (run / "train.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    got = _restart(tmp_path, f"PYTHONPATH={value} python train.py")
    time.sleep(3)
    assert not marker.exists() and not ran.exists(), got
    assert "not restarted" in got and "empty entry" in got, got


def test_a_pythonpath_naming_its_folders_still_restarts(tmp_path: Path) -> None:
    """Control: the folders a PYTHONPATH names are shown, and the person judges them (promise 2)."""
    run = _run_folder(tmp_path)
    ran = tmp_path / "RAN"
    (run / "train.py").write_text(f"import os\nopen({str(ran)!r}, 'w').write(os.environ['PYTHONPATH'])\n")
    got = _restart(tmp_path, "PYTHONPATH=/opt/site-extra:/opt/more python train.py")
    _wait_for(ran)
    assert ran.read_text() == "/opt/site-extra:/opt/more", got


def test_a_url_encoded_letter_in_a_secrets_name_never_hides_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    values = ["QkASAOsE1nYEZ9GlGHpY", "Zr8uQ2mVb7LxT4nHk1Ws", "Jd3Kp9Qw2Ex7Rt5Yu1Io"]
    log = root / "k.log"
    log.write_text(f"GET https://api.example/v1/run?pass%77ord={values[0]}&epoch=3\n"
                   f"export API%5FKEY={values[1]}\n"
                   f"https://hub.example/x?%74oken={values[2]}\n")
    shown = _shown_over_mcp(tmp_path, root, log, [("read_log_tail", {}), ("grep_log", {"pattern": "."})])
    for v in values:
        for out in shown:
            assert v not in out, (v, out)


def test_reserved_bytes_keep_their_url_encoding(tmp_path: Path) -> None:
    """Control: only letters, digits and `_` are decoded; a URL's `%20`, `%3D` and `%2F` are shown as written."""
    root = tmp_path / "root"
    root.mkdir()
    log = root / "k.log"
    log.write_text("GET https://data.example/shard%2F0001%20copy?split%3Dtrain\n")
    shown = _shown_over_mcp(tmp_path, root, log, [("read_log_tail", {})])
    assert "shard%2F0001%20copy?split%3Dtrain" in shown[0], shown
