"""Issue 14's forty-third round: an outside tester's attacks (a helper session that did not write this code), driven over
stdio with a real MCP client that accepts; each failed on the code before its fix (docs/security.md, "Forty-third round").

The forty-second round refused a run folder holding a module named like a launcher's package; the launchers' second
stages import far more than their own package. DeepSpeed's runner starts `python -u -m deepspeed.launcher.launch` in the
run folder, first on that process's import path, and it imports about a hundred modules before the run's script: a planted
`hjson.py` ran (real DeepSpeed 0.19). `accelerate launch --use_deepspeed --num_machines 2` starts that runner with
`--hostfile None --launcher pdsh`, and a file named `None` in the run folder gave ssh its ProxyCommand. `python -m
torch.distributed.run` is a launcher run with the run folder first on its path: torch's rendezvous registry loads every
`torchrun.handlers` entry point there (real torch here). So deepspeed is never restarted, nor accelerate's DeepSpeed path
(its flag, its config, `ACCELERATE_USE_DEEPSPEED`, the server's default config choosing it), and `-m MODULE` (python,
torchrun, accelerate) only runs a module of the run folder's own. Stand-in launchers on PATH record how they are started.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.test_fortieth_round import _restart
from tests.security.test_fortysecond_round import ACCELERATE_CONFIG, ACCELERATE_REFUSED, _run_folder, _stand_ins
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes


@pytest.mark.parametrize("line", ["deepspeed train.py", "srun -N 1 deepspeed train.py", "mpirun -np 1 deepspeed train.py"])
def test_deepspeed_is_never_restarted(tmp_path: Path, monkeypatch, line: str) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    marker = tmp_path / "PWNED"
    (_run_folder(tmp_path) / "hjson.py").write_text(f"open({str(marker)!r}, 'w').write('planted')\n")
    got = _restart(tmp_path, line)
    _wait_for(started, 3)
    assert not marker.exists() and not started.exists(), got
    assert "deepspeed" in got and "not restarted" in got, got


@pytest.mark.parametrize("line, config", [
    ("accelerate launch --use_deepspeed --num_machines 2 --machine_rank 0 --num_processes 2 train.py", None),
    ("accelerate launch --config_file cfg.yaml train.py", "distributed_type: DEEPSPEED\n"),
    ("ACCELERATE_USE_DEEPSPEED=true accelerate launch --num_processes 1 train.py", None),
])
def test_accelerates_deepspeed_path_is_never_restarted(tmp_path: Path, monkeypatch, line: str, config: str | None) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    run = _run_folder(tmp_path)
    (run / "None").write_text("-oProxyCommand=./x slots=1\nlocalhost slots=1\n")
    if config:
        (run / "cfg.yaml").write_text(ACCELERATE_CONFIG.replace("distributed_type: MULTI_GPU\n", "") + config)
    got = _restart(tmp_path, line)
    _wait_for(started, 3)
    assert not started.exists(), (got, started.read_text())
    assert "not restarted" in got, got


def test_the_servers_default_accelerate_config_choosing_deepspeed_is_never_restarted(tmp_path: Path, monkeypatch) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    home = tmp_path / "hf"
    (home / "accelerate").mkdir(parents=True)
    (home / "accelerate" / "default_config.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n")
    monkeypatch.setenv("HF_HOME", str(home))
    got = _restart(tmp_path, "accelerate launch --num_processes 1 train.py")
    _wait_for(started, 3)
    assert not started.exists(), (got, started.read_text())
    assert ACCELERATE_REFUSED in got, got  # since the sixtieth round, refused before any config is read


def _planted_handler(run: Path, marker: Path) -> None:
    """A `torchrun.handlers` entry point declared by a dist-info folder in the run folder."""
    (run / "x-1.0.dist-info").mkdir(parents=True)
    (run / "x-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: x\nVersion: 1.0\n")
    (run / "x-1.0.dist-info" / "entry_points.txt").write_text("[torchrun.handlers]\nextra = plug:make\n")
    (run / "plug.py").write_text(f"open({str(marker)!r}, 'w').write('planted')\ndef make(params):\n    raise RuntimeError('x')\n")


def test_python_dash_m_runs_only_the_run_folders_own_module(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    _planted_handler(run, marker)
    got = _restart(tmp_path, "python -m torch.distributed.run --nproc-per-node 1 train.py")
    _wait_for(marker, 20)
    assert not marker.exists(), got
    assert "torch.distributed.run" in got and "not restarted" in got, got


def test_the_planted_entry_point_does_load_under_python_dash_m(tmp_path: Path) -> None:
    """The attack's mechanism, run by hand with no policy: the registry loads the run folder's entry point."""
    pytest.importorskip("torch")
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    _planted_handler(run, marker)
    subprocess.run([sys.executable, "-c", "import torch.distributed.elastic.rendezvous"], cwd=run, capture_output=True,
                   timeout=300, check=False, env={"PYTHONPATH": str(run), "PATH": "/usr/bin:/bin"})
    assert marker.exists()


def test_a_module_of_the_run_folders_own_is_not_restarted_either(tmp_path: Path) -> None:
    """Was the control (`python -m pkg.train` ran the run's own package); since the sixty-first round no module is run by
    name, and the answer says to record the script's path."""
    run = _run_folder(tmp_path)
    (run / "pkg").mkdir()
    (run / "pkg" / "__init__.py").write_text("")
    ran = tmp_path / "RAN"
    (run / "pkg" / "train.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    got = _restart(tmp_path, "python -m pkg.train --lr 0.1")
    _wait_for(ran, 3)
    assert not ran.exists() and "record the script's path" in got, got
