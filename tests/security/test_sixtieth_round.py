"""Issue 14's sixtieth round (inside, after the fifty-ninth): restart-unchanged narrowed instead of its allow-lists widened.

Rounds 42 to 59 kept finding a layer of `accelerate launch` the allow-lists did not model (its config's sections becoming
options, a second `--config_file`, a mapping under a plain key, hub kernels named by a key): accelerate is not restarted any
more, like deepspeed, srun, mpirun and horovodrun; the answer names torchrun. torchrun gives up `--numa-binding` (it starts
each worker under `numactl`, a program the question does not name), `--rdzv-conf` and `PET_RDZV_CONF` (their keys were an
allow-list of their own: round 52's `store_type=file`), and takes a run id only as a plain name (torchrun names the folder
it writes its workers' logs to after it: `--rdzv-id /srv/x` wrote outside the run folder). Every line below started its
launcher on the commit before (2d4ebdb6); the control still starts.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, answer, text
from tests.security.test_fortysecond_round import ACCELERATE_CONFIG, ACCELERATE_REFUSED, _stand_ins
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes

REFUSED = {  # line -> what the refusal must say
    "accelerate launch --config_file cfg.yaml train.py": ACCELERATE_REFUSED,
    "accelerate launch --num_processes 1 --mixed_precision bf16 train.py": ACCELERATE_REFUSED,
    "torchrun --nproc-per-node 1 --numa-binding node train.py": "--numa-binding",
    "torchrun --nproc-per-node 1 --numa_binding=exclusive train.py": "--numa_binding",
    "torchrun --nproc-per-node 1 --numa node train.py": "--numa",
    "torchrun --nproc-per-node 1 --rdzv-conf join_timeout=10 train.py": "--rdzv-conf",
    "PET_RDZV_CONF=join_timeout=10 torchrun --nproc-per-node 1 train.py": "PET_RDZV_CONF",
    "torchrun --nproc-per-node 1 --rdzv-id /srv/elsewhere/x train.py": "rendezvous id is not a plain name",
    "torchrun --nproc-per-node 1 --rdzv_id=../x train.py": "rendezvous id is not a plain name",
    "PET_RDZV_ID=/srv/elsewhere/x torchrun --nproc-per-node 1 train.py": "rendezvous id is not a plain name",
}
CONTROL = "torchrun --nproc-per-node 1 --rdzv-id run-7_b train.py"


def _restart_each(tmp_path: Path, lines: list[str]) -> list[str]:
    """Each line as the command.txt of its own run folder, asked of one server whose person accepts every question."""
    runs = []
    for i, line in enumerate(lines):
        run = tmp_path / "root" / f"run{i}"
        run.mkdir(parents=True)
        (run / "train.py").write_text("print('ok')\n")
        (run / "cfg.yaml").write_text(ACCELERATE_CONFIG)
        (run / "command.txt").write_text(line + "\n")
        runs.append(run)
    got: list[str] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[tmp_path / "root"]).client(elicit=answer("accept")) as c:
            for run in runs:
                got.append(text(await c.call_tool("request_action", {"action": {"kind": "restart-unchanged",
                                                                                  "command_file": str(run / "command.txt")}})))

    anyio.run(go)
    return got


def test_accelerate_numa_binding_rdzv_conf_and_a_path_as_run_id_are_never_started(tmp_path: Path, monkeypatch) -> None:
    started = _stand_ins(tmp_path, monkeypatch)  # accelerate and torchrun stand-ins that record each start
    got = _restart_each(tmp_path, list(REFUSED))
    _wait_for(started, 3)
    assert not started.exists(), started.read_text()
    for (line, why), answer_text in zip(REFUSED.items(), got, strict=True):
        assert "not restarted" in answer_text and why in answer_text, (line, answer_text)


def test_a_plain_torchrun_line_with_a_named_run_id_still_starts(tmp_path: Path, monkeypatch) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    got = _restart_each(tmp_path, [CONTROL])
    _wait_for(started)
    assert started.exists(), got
    assert "--rdzv-id run-7_b" in started.read_text()
