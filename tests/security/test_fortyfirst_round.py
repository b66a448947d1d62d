"""Issue 14's forty-first round: an outside tester's attacks (a helper session that did not write this code), driven
over stdio with a real MCP client that accepts; each failed on the code before its fix (docs/security.md, "Forty-first
round"). `TORCH_LOGS`, admitted as tuning, names modules torch imports while it sets up logging when a name is not a log
it knows: `TORCH_LOGS=+dynamo,recompile` imported a package planted in the run folder as the script ran `import torch`
(real torch here). PRRTE's `--prtemca` and PMIx's `--pmixmca` set the variables `--mca` was read as in the fortieth
round, and pyxis' `srun --container-image` picks the python that runs as `--container` does; stand-in launchers on PATH
record what they are started with (Open MPI and SLURM are not installed here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.test_fortieth_round import _launchers, _restart
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes


def test_torch_logs_naming_a_run_folder_package_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    run = tmp_path / "root" / "run"
    (run / "recompile").mkdir(parents=True)
    marker = tmp_path / "PWNED"
    (run / "recompile" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('planted')\n")
    (run / "uses_torch.py").write_text("import torch\n")
    got = _restart(tmp_path, "TORCH_LOGS=+dynamo,recompile python uses_torch.py")
    _wait_for(marker, 20)
    assert not marker.exists(), got
    assert "TORCH_LOGS" in got and "not restarted" in got, got


@pytest.mark.parametrize("line", [
    "mpirun --prtemca plm_ssh_args '-o ProxyCommand ./x' -H gpu2 -np 2 python train.py",
    "mpirun --pmixmca psec native -np 2 python train.py",
    "srun --container-image=./evil.sqsh -N 1 python train.py",
    "srun --container-mounts ./m:/m -N 1 python train.py",
])
def test_every_mca_family_and_container_option_is_read_as_the_variable_it_sets(tmp_path: Path, monkeypatch, line: str) -> None:
    started = _launchers(tmp_path, monkeypatch)
    got = _restart(tmp_path, line)
    _wait_for(started, 3)
    assert not started.exists(), (got, started.read_text())
    assert "not restarted" in got, got
