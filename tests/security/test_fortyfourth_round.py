"""Issue 14's forty-fourth round: an outside tester's attacks (a helper session that did not write this code), driven over
stdio with a real MCP client that accepts; each failed on the code before its fix (docs/security.md, "Forty-fourth round").

Three causes. accelerate's allowed options named libraries imported by name from a path that starts with the run folder:
`--dynamo_backend tvm` imported a planted `tvm.py` at the first forward, `--use_megatron_lm` a planted `megatron/` (FP8
backends and `mixed_precision: fp8` pick theirs the same way). Python's one long option that takes a value,
`--check-hash-based-pycs MODE`, hid the `-m torch.distributed.run` the forty-third round refuses. And a launcher recorded by
a path in the run folder that links to the server's own program ran with that argv[0]: Python read the run folder's
pyvenv.cfg (a planted .pth ran; `home =` moved the standard library), MPICH's mpirun started the run folder's
hydra_pmi_proxy. Stand-in launchers on PATH record how they are started; the Python cases run the real interpreter.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.security.test_fortieth_round import _restart
from tests.security.test_fortysecond_round import ACCELERATE_CONFIG, ACCELERATE_REFUSED, _run_folder, _stand_ins
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes


@pytest.mark.parametrize("line, config", [
    ("accelerate launch --cpu --num_processes 1 --dynamo_backend tvm train.py", None),
    ("accelerate launch --use_megatron_lm --num_processes 1 train.py", None),
    ("accelerate launch --fp8_backend te --num_processes 1 train.py", None),
    ("accelerate launch --mixed_precision fp8 --num_processes 1 train.py", None),
    ("ACCELERATE_MIXED_PRECISION=fp8 accelerate launch --num_processes 1 train.py", None),
    ("accelerate launch --config_file cfg.yaml train.py", "dynamo_config:\n  dynamo_backend: TVM\n"),
    ("accelerate launch --config_file cfg.yaml train.py", "megatron_lm_config:\n  megatron_lm_tp_degree: 2\n"),
])
def test_an_accelerate_option_naming_a_library_imported_by_name_is_refused(tmp_path: Path, monkeypatch, line: str,
                                                                           config: str | None) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    if config:
        (_run_folder(tmp_path) / "cfg.yaml").write_text(ACCELERATE_CONFIG + config)
    got = _restart(tmp_path, line)
    _wait_for(started, 3)
    assert not started.exists(), (got, started.read_text())
    assert "not restarted" in got, got


def test_torchs_own_compile_backends_are_not_restarted_through_accelerate_either(tmp_path: Path, monkeypatch) -> None:
    """Was the control (inductor and bf16 are torch's own); since the sixtieth round accelerate is not restarted at all."""
    started = _stand_ins(tmp_path, monkeypatch)
    (_run_folder(tmp_path) / "cfg.yaml").write_text(ACCELERATE_CONFIG + "dynamo_config:\n  dynamo_backend: INDUCTOR\n")
    got = _restart(tmp_path, "accelerate launch --config_file cfg.yaml --dynamo_backend inductor --mixed_precision bf16 train.py")
    _wait_for(started, 3)
    assert not started.exists() and ACCELERATE_REFUSED in got, got


def test_a_long_interpreter_option_never_hides_dash_m(tmp_path: Path) -> None:
    got = _restart(tmp_path, "python --check-hash-based-pycs default -m torch.distributed.run --nproc-per-node 1 train.py")
    assert "torch.distributed.run" in got and "not restarted" in got, got


@pytest.mark.parametrize("link", ["bin/python", "venv/bin/python3"])
def test_a_launcher_linked_from_the_run_folder_is_refused(tmp_path: Path, link: str) -> None:
    run = _run_folder(tmp_path)
    path = run / link
    path.parent.mkdir(parents=True)
    path.symlink_to(sys.executable)
    marker = tmp_path / "PWNED"
    site = run / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    site.mkdir(parents=True)
    (site / "zz.pth").write_text(f"import os; open({str(marker)!r}, 'w').write('pth')\n")
    (path.parent.parent / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\ninclude-system-site-packages = true\n")
    got = _restart(tmp_path, f"{link} train.py")
    time.sleep(2)
    assert not marker.exists(), got
    assert "not the server's own" in got, got


def test_the_servers_own_interpreter_by_its_absolute_path_still_restarts(tmp_path: Path) -> None:
    """Control: the path the server runs from names no other file beside it."""
    run = _run_folder(tmp_path)
    ran = tmp_path / "RAN"
    (run / "mine.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    got = _restart(tmp_path, f"{sys.executable} mine.py")
    _wait_for(ran, 20)
    assert ran.exists(), got
