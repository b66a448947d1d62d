"""Issue 14's forty-sixth round: an outside tester's attacks (a helper session that did not write this code), driven over
stdio with a real MCP client; each failed on the code before its fix (docs/security.md, "Forty-sixth round").

Two causes. torchrun's `-m` was judged by a second, smaller parser of torchrun's options than the forty-fifth round's
allow-list: it read `--`, a prefix of a flag (`--stand`) and a short option with its value attached (`-t3`) as taking the
next word, so the `-m torch.distributed.run` after them was never judged, and the worker ran `python -u -m
torch.distributed.run` in the run folder, which loaded a planted `torchrun.handlers` entry point (real torchrun). And
kaggle.json's `"key"` was masked only on the username's line: pretty-printed (`cat ~/.kaggle/kaggle.json`) or as Python
prints the loaded dict, it came back in clear.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.security.test_eleventh_round import _shown_over_mcp
from tests.security.test_fortyfifth_round import _restart
from tests.security.test_fortysecond_round import _run_folder, _stand_ins
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes


def _planted_handler(run: Path, marker: Path) -> None:
    """A `torchrun.handlers` entry point in the run folder: torch's rendezvous registry loads every one on import."""
    (run / "evilplug-1.0.dist-info").mkdir()
    (run / "evilplug-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: evilplug\nVersion: 1.0\n")
    (run / "evilplug-1.0.dist-info" / "entry_points.txt").write_text("[torchrun.handlers]\nevil = evilmod:make\n")
    (run / "evilmod.py").write_text(f"open({str(marker)!r}, 'w').write('planted')\nmake = lambda: (lambda p: None)\n")


def test_torchrun_dash_m_after_a_double_dash_never_loads_the_run_folders_entry_points(tmp_path: Path) -> None:
    """Real torchrun: `-m -- torch.distributed.run` started the planted entry point's module after the accept."""
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    _planted_handler(run, marker)
    (run / "train.py").write_text("print('train')\n")
    got = _restart(tmp_path, "torchrun --nproc-per-node 1 --standalone -m -- torch.distributed.run --nproc-per-node 1 "
                             "--standalone train.py")
    time.sleep(8)
    assert not marker.exists(), got
    assert "not restarted" in got and "torch.distributed.run" in got, got


@pytest.mark.parametrize("options", ["--stand -m", "-t3 -m", "-r0 -m", "--virtual_local -m", "--tee=3 -m", "-m --role x --"])
def test_torchruns_module_is_read_by_the_parser_that_reads_its_options(tmp_path: Path, monkeypatch, options: str) -> None:
    started = _stand_ins(tmp_path, monkeypatch)  # a torchrun stand-in that records its start
    _planted_handler(_run_folder(tmp_path), tmp_path / "PWNED")
    got = _restart(tmp_path, f"torchrun --nproc-per-node 1 {options} torch.distributed.run train.py")
    _wait_for(started, 2)
    assert not started.exists(), got
    assert "not restarted" in got and "torch.distributed.run" in got, got


def test_torchrun_never_hands_python_an_option_as_its_script(tmp_path: Path, monkeypatch) -> None:
    """`torchrun -- -m MOD`: argparse takes `-m` as the script, and the worker runs `python -u -m MOD`."""
    started = _stand_ins(tmp_path, monkeypatch)
    got = _restart(tmp_path, "torchrun --nproc-per-node 1 -- -m torch.distributed.run train.py")
    _wait_for(started, 2)
    assert not started.exists() and "not restarted" in got, got


def test_a_pretty_printed_or_repr_kaggle_key_never_leaves(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    keys = ["fedcba9876543210fedcba987654321f", "aaaabbbbccccddddeeeeffff00001111", "0123456789abcdef0123456789abcde1"]
    log = root / "k.log"
    log.write_text("cat ~/.kaggle/kaggle.json\n" + json.dumps({"username": "alice", "key": keys[0]}, indent=4) + "\n"
                   + "loaded creds: " + repr({"username": "bob", "key": keys[1]}) + "\n"
                   + 'kaggle.json: {"username":"u","key":"' + keys[2] + '"}\n')
    shown = _shown_over_mcp(tmp_path, root, log, [("read_log_tail", {}), ("grep_log", {"pattern": "."})])
    assert all("[REDACTED]" in out for out in shown), shown
    for k in keys:
        for out in shown:
            assert k not in out, (k, out)


def test_a_kaggle_shaped_key_alone_is_kept(tmp_path: Path) -> None:
    """Control: a bare `"key"` is no keyword (promise 3's list): a 32-hex value that is not after a username stays."""
    root = tmp_path / "root"
    root.mkdir()
    log = root / "k.log"
    log.write_text('{"key": "d41d8cd98f00b204e9800998ecf8427e", "epoch": 3}\n')
    shown = _shown_over_mcp(tmp_path, root, log, [("read_log_tail", {})])
    assert "d41d8cd98f00b204e9800998ecf8427e" in shown[0], shown
