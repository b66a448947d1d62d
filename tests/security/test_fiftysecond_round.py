"""Issue 14's fifty-second round: an outside tester's real restarts (a helper session that did not write this code); each
break failed on the code before its fix (docs/security.md, "Fifty-second round").

`-m MODULE` counted as the run folder's own when any entry of that name was there: a plain file `pytest` (no `.py`) made
`python -m pytest` pass, the installed pytest ran with the folder first on its path, and a plugin planted there as a
`.dist-info` entry point loaded. And torchrun's rendezvous took any `--rdzv-conf`: `store_type=file` makes the c10d backend
keep its state in a file named by the endpoint (`localhost`, a file of the run folder), which the agent unpickles; the same
through `PET_RDZV_CONF` and accelerate's `--rdzv_conf` (real torchrun below; accelerate through a stand-in).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.security.test_fortyfifth_round import _restart
from tests.security.test_fortysecond_round import _run_folder, _stand_ins

pytestmark = pytest.mark.slow  # real child processes

_PLANT = """
import base64, pickle, sys
from torch.distributed import FileStore

class Payload:
    def __reduce__(self):
        return (open, ({marker!r}, "w"))

FileStore(sys.argv[1], -1).set("torch.rendezvous.none", base64.b64encode(pickle.dumps(Payload())).decode())
"""


def _plant_rendezvous_state(tmp_path: Path, name: str) -> Path:
    """A real FileStore at `run/name` whose rendezvous state is a pickle that creates the marker when loaded."""
    marker = tmp_path / "PWNED"
    plant = tmp_path / "plant.py"
    plant.write_text(_PLANT.format(marker=str(marker)))
    subprocess.run([sys.executable, str(plant), str(_run_folder(tmp_path) / name)], check=True, timeout=120)
    (_run_folder(tmp_path) / "train.py").write_text("print('train ok')\n")
    return marker


@pytest.mark.parametrize("decoy", ["file", "namespace-folder"])
def test_python_m_never_runs_an_installed_module_through_a_decoy_of_its_name(tmp_path: Path, decoy: str) -> None:
    run = _run_folder(tmp_path)
    marker = tmp_path / "PWNED"
    if decoy == "file":
        (run / "pytest").write_text("decoy\n")
    else:
        (run / "pytest").mkdir()
    dist = run / "evil-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nevil = evilplug\n")
    (run / "evilplug.py").write_text(f"open({str(marker)!r}, 'w').write('planted pytest plugin')\n")
    got = _restart(tmp_path, "python -m pytest -q --co")
    time.sleep(5)
    assert not marker.exists(), got
    assert "not restarted" in got and "runs a module by name" in got, got  # any -m since the sixty-first round


def test_python_m_of_the_folders_own_module_is_not_restarted_either(tmp_path: Path) -> None:
    """Was the control (a module the folder holds as `name.py` or `name/__init__.py` ran); since the sixty-first round no
    module is run by name: the interpreter looks it up after every check."""
    run = _run_folder(tmp_path)
    ran = tmp_path / "RAN"
    (run / "trainer").mkdir()
    (run / "trainer" / "__init__.py").write_text("")
    (run / "trainer" / "__main__.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    got = _restart(tmp_path, "python -m trainer")
    time.sleep(3)
    assert not ran.exists() and "runs a module by name" in got and "started pid" not in got, got


@pytest.mark.parametrize("line", [
    "torchrun --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint localhost --rdzv-conf store_type=file train.py",
    "torchrun --nproc-per-node 1 --rdzv-backend=c10d --rdzv-endpoint=localhost --rdzv-conf=join_timeout=5,store_type=file train.py",
    "PET_RDZV_BACKEND=c10d PET_RDZV_ENDPOINT=localhost PET_RDZV_CONF=store_type=file torchrun --nproc-per-node 1 train.py",
])
def test_torchruns_rendezvous_never_reads_its_state_from_a_file_of_the_run_folder(tmp_path: Path, line: str) -> None:
    marker = _plant_rendezvous_state(tmp_path, "localhost")
    got = _restart(tmp_path, line)
    time.sleep(15)
    assert not marker.exists(), got
    assert "not restarted" in got and "store_type" in got, got


@pytest.mark.parametrize("line", [
    "torchrun --nproc-per-node 1 --rdzv-backend etcd --rdzv-endpoint localhost:2379 train.py",
    "PET_RDZV_BACKEND=etcd-v2 torchrun --nproc-per-node 1 train.py",
])
def test_torchruns_rendezvous_backend_is_c10d_or_static(tmp_path: Path, line: str) -> None:
    (_run_folder(tmp_path) / "train.py").write_text("print('train ok')\n")
    got = _restart(tmp_path, line)
    assert "not restarted" in got and "c10d" in got, got


def test_accelerates_rendezvous_configuration_is_judged_as_torchruns(tmp_path: Path, monkeypatch) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    (_run_folder(tmp_path) / "train.py").write_text("print('train ok')\n")
    got = _restart(tmp_path, "accelerate launch --multi_gpu --num_processes 2 --rdzv_backend c10d "
                             "--rdzv_conf store_type=file --main_process_ip localhost train.py")
    time.sleep(2)
    assert not started.exists(), got
    assert "not restarted" in got and "--rdzv_conf store_type=file" in got, got
