"""Issue 14's forty-second round: an outside tester's attacks (a helper session that did not write this code), driven over
stdio with a real MCP client that accepts; each failed on the code before its fix (docs/security.md, "Forty-second round").

Three causes. DeepSpeed's runner starts its per-node launcher as `python -u -m deepspeed.launcher.launch` in the folder
the restart starts in, the run folder, which `-m` puts first on the import path: a `deepspeed/` package planted there ran
in its place (the tester used real DeepSpeed 0.19; here a stand-in `deepspeed` does what its runner does). `accelerate
launch --config_file cfg.yaml` copies every key of the file's sections onto its arguments, so `mpirun_config: {no_python:
true}` was `--no_python`. And launcher options the refusal lists never named were admitted: Open MPI's `--launch-agent`
and `--prefix`, hydra's `-launcher-exec-args`, horovodrun's `--mpi-args`, deepspeed's `--launcher_args` and `--hostfile`,
and a `.deepspeed_env` of variables for every rank. Each launcher now takes only options known to place or tune the run,
and accelerate's config file only such keys. Stand-in launchers on PATH record how they are started (none is installed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.test_fortieth_round import _restart
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes


def _stand_ins(tmp_path: Path, monkeypatch) -> Path:
    """mpirun, srun, horovodrun and accelerate stand-ins that record how they were started; a deepspeed that does what
    DeepSpeed's runner does on one machine: start `python -u -m deepspeed.launcher.launch` where it was started."""
    bin_dir = tmp_path / "launchers"
    bin_dir.mkdir()
    started = tmp_path / "STARTED"
    for name in ("mpirun", "srun", "horovodrun", "accelerate", "torchrun"):
        (bin_dir / name).write_text(f"#!/bin/sh\necho \"$0 $*\" >> {started}\n")
    (bin_dir / "deepspeed").write_text(f"#!/bin/sh\necho \"$0 $*\" >> {started}\n"
                                       f"exec {sys.executable} -u -m deepspeed.launcher.launch \"$@\"\n")
    for p in bin_dir.iterdir():
        p.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return started


def _run_folder(tmp_path: Path) -> Path:
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True, exist_ok=True)
    return run


@pytest.mark.parametrize("planted", ["deepspeed/launcher/launch.py", "deepspeed.py"])
def test_a_run_folder_module_named_like_the_launchers_package_is_refused(tmp_path: Path, monkeypatch, planted: str) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    marker = tmp_path / "PWNED"
    path = _run_folder(tmp_path) / planted
    path.parent.mkdir(parents=True, exist_ok=True)
    for d in [p for p in path.parents if p.name == "deepspeed" or p.parent.name == "deepspeed"]:
        (d / "__init__.py").write_text("")
    path.write_text(f"open({str(marker)!r}, 'w').write('planted')\n")
    got = _restart(tmp_path, "deepspeed train.py")
    _wait_for(started, 3)
    assert not marker.exists() and not started.exists(), got
    assert "deepspeed" in got and "not restarted" in got, got


def test_the_stand_in_deepspeed_does_run_a_planted_launcher(tmp_path: Path) -> None:
    """The stand-in is the attack's mechanism, run by hand with no policy: the planted package is what `-m` imports."""
    run = _run_folder(tmp_path)
    (run / "deepspeed" / "launcher").mkdir(parents=True)
    (run / "deepspeed" / "__init__.py").write_text("")
    (run / "deepspeed" / "launcher" / "__init__.py").write_text("")
    (run / "deepspeed" / "launcher" / "launch.py").write_text("print('planted launcher')\n")
    out = subprocess.run([sys.executable, "-u", "-m", "deepspeed.launcher.launch"], cwd=run, capture_output=True, text=True,
                         timeout=60, check=True)
    assert "planted launcher" in out.stdout, out


# what the answer says of any accelerate line since the sixtieth round
ACCELERATE_REFUSED = "ml-skills restarts only python and torchrun"
ACCELERATE_CONFIG = """compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: 'no'
enable_cpu_affinity: false
gpu_ids: all
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 2
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
"""


@pytest.mark.parametrize("extra", [
    "mpirun_config:\n  no_python: true\n",
    "mpirun_config: {no_python: true}\n",
    "deepspeed_config:\n  deepspeed_multinode_launcher: openmpi\n  deepspeed_hostfile: ./hosts\n",
    "commands: ['./x.sh']\n",
    "main_process_ip: ranks.example\n",
])
def test_an_accelerate_config_file_sets_only_what_places_or_tunes_the_run(tmp_path: Path, monkeypatch, extra: str) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    (_run_folder(tmp_path) / "cfg.yaml").write_text(ACCELERATE_CONFIG + extra)
    got = _restart(tmp_path, "accelerate launch --config_file cfg.yaml --num_processes 1 ./train.py")
    _wait_for(started, 3)
    assert not started.exists(), (got, started.read_text())
    assert "cfg.yaml" in got and "not restarted" in got, got


@pytest.mark.parametrize("line", [
    "mpirun --launch-agent 'python3 evil.py' -H a,b -np 2 python train.py",
    "mpirun --prefix /tmp/evil -H a,b -np 2 python train.py",
    "mpirun -launcher-exec-args -oProxyCommand=./x -np 2 python train.py",
    "mpirun -bootstrap-exec ./x -np 2 python train.py",
    "horovodrun --mpi-args '--mca plm_rsh_agent ./x' -np 2 python train.py",
    "srun --chdir /tmp -N 1 python train.py",
    "deepspeed --launcher openmpi --launcher_args '--mca plm_rsh_args -oProxyCommand=./x' train.py",
    "deepspeed --hostfile hostfile --master_addr 127.0.0.1 train.py",
    "deepspeed --venv_script ./x.sh train.py",
    "accelerate launch --mpirun_hostfile hosts train.py",
    "accelerate launch --tpu_use_cluster --commands ./x.sh train.py",
    "accelerate launch --no_py ./train.py",
    "accelerate config",
])
def test_a_launcher_option_not_known_to_place_or_tune_the_run_is_refused(tmp_path: Path, monkeypatch, line: str) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    got = _restart(tmp_path, line)
    _wait_for(started, 3)
    assert not started.exists(), (got, started.read_text())
    assert "not restarted" in got, got


def test_a_deepspeed_env_file_in_the_run_folder_is_refused(tmp_path: Path, monkeypatch) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    (_run_folder(tmp_path) / ".deepspeed_env").write_text("LD_PRELOAD=/tmp/evil.so\n")
    got = _restart(tmp_path, "deepspeed --num_gpus 1 train.py")
    _wait_for(started, 3)
    assert not started.exists(), (got, started.read_text())
    assert "not restarted" in got, got  # since the forty-third round deepspeed is never restarted


@pytest.mark.parametrize("line", [
    "torchrun --nnodes 1 --nproc-per-node 2 --rdzv-backend c10d --rdzv_endpoint localhost:29400 --max-restarts=0 train.py --lr 3e-4",
    "torchrun --standalone --nproc_per_node=gpu -r 3 --tee 3 --log-dir logs train.py",
    "torchrun --nproc-per-node 1 --rdzv-id job_42.a train.py --config_file mine.yaml --lr 3e-4",
])
def test_a_launch_with_known_options_and_config_still_restarts(tmp_path: Path, monkeypatch, line: str) -> None:
    """Control: the options a launch line carries (torchrun's placement, rendezvous and output; since the forty-fifth round
    srun, mpirun and horovodrun are not restarted, nor accelerate since the sixtieth round), a run id that is a plain name,
    and the script's own options after it (the script's `--config_file` and flags are its own) still restart."""
    started = _stand_ins(tmp_path, monkeypatch)
    (_run_folder(tmp_path) / "cfg.yaml").write_text(ACCELERATE_CONFIG + "fsdp_config:\n  fsdp_version: 2\n  offload_params: false\n")
    got = _restart(tmp_path, line)
    _wait_for(started)
    assert started.exists(), got
    assert line.split()[0] in started.read_text()
