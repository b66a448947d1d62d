"""Issue 14's fortieth round: an outside tester's attacks (a helper session that did not write this code), driven over
stdio with a real MCP client that accepts; each failed on the code before its fix (docs/security.md, "Fortieth round").
The thirty-ninth round's allow-list admitted every `OMPI_MCA_*`, `SLURM_*`, `SRUN_*` and `HOROVOD_*` name as a
launcher's tuning: `OMPI_MCA_plm_rsh_args=-oProxyCommand=./x` (and `mpirun --mca plm_rsh_args ...`) makes the ssh Open MPI
starts for each node run ./x from the run folder, and `SLURM_CONTAINER=./bundle` (srun's `--container`) runs the step in a
bundle whose python is any program. Open MPI and SLURM are not installed here: a stand-in `mpirun` and `srun` on an
absolute PATH entry record the environment and arguments they are started with, which is what the policy controls."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, answer, text
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes


def _launchers(tmp_path: Path, monkeypatch) -> Path:
    """Stand-ins for mpirun and srun that write what they were started with to tmp_path/STARTED."""
    bin_dir = tmp_path / "launchers"
    bin_dir.mkdir()
    for name in ("mpirun", "srun"):
        p = bin_dir / name
        p.write_text(f"#!/bin/sh\n{{ echo \"$0 $*\"; env | grep -E '^(OMPI_MCA|SLURM)_' ; }} >> {tmp_path / 'STARTED'}\n")
        p.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "STARTED"


def _restart(tmp_path: Path, line: str) -> str:
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "train.py").write_text("print('ok')\n")
    (run / "command.txt").write_text(line + "\n")
    got: list[str] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[tmp_path / "root"]).client(elicit=answer("accept")) as c:
            got.append(text(await c.call_tool("request_action", {"action": {"kind": "restart-unchanged",
                                                                              "command_file": str(run / "command.txt")}})))

    anyio.run(go)
    return got[0]


@pytest.mark.parametrize("line", [
    "OMPI_MCA_plm_rsh_args=-oProxyCommand=./x mpirun -H n1,n2 -np 2 python train.py",
    "mpirun --mca plm_rsh_args -oProxyCommand=./x -H n1,n2 -np 2 python train.py",
    "SLURM_CONTAINER=./bundle srun python train.py",
    "srun --container=./bundle python train.py",
])
def test_a_launcher_variable_that_names_a_program_or_a_root_is_refused_in_either_spelling(tmp_path: Path, monkeypatch,
                                                                                         line: str) -> None:
    started = _launchers(tmp_path, monkeypatch)
    got = _restart(tmp_path, line)
    _wait_for(started, 3)
    assert not started.exists(), (got, started.read_text())
    assert "not restarted" in got, got


def test_a_launchers_known_tuning_still_restarts(tmp_path: Path, monkeypatch) -> None:
    """Control: Open MPI's transport choice and SLURM's CPUs per task are set as recorded after the accept, on a python line.
    Since the forty-fifth round mpirun and srun themselves are not restarted, whatever they carry."""
    started = _launchers(tmp_path, monkeypatch)
    got = _restart(tmp_path, "OMPI_MCA_btl=^openib SLURM_CPUS_PER_TASK=4 mpirun --mca pml ob1 -np 1 python train.py")
    assert "MPI runtime" in got and not started.exists(), got
    seen = tmp_path / "ENV"
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "train.py").write_text(f"import os\nopen({str(seen)!r}, 'w').write(os.environ['OMPI_MCA_btl'] + ' ' + "
                                  "os.environ['SLURM_CPUS_PER_TASK'])\n")
    (run / "command.txt").write_text("OMPI_MCA_btl=^openib SLURM_CPUS_PER_TASK=4 python train.py\n")

    async def go() -> None:
        async with Server(tmp_path, roots=[tmp_path / "root"]).client(elicit=answer("accept")) as c:
            await c.call_tool("request_action", {"action": {"kind": "restart-unchanged", "command_file": str(run / "command.txt")}})

    anyio.run(go)
    _wait_for(seen)
    assert seen.read_text() == "^openib 4", seen.read_text()
