"""The plan's first step is the remedy the decisive line names, when the line names its cause: a safe inspection
ranks after it (its lower risk would otherwise put it first), a refusal's words choose between a role and a quota,
and a collective that failed before any training step asks about the transport.

Real logs only: a torchrun launch on a port another process holds (run here, gloo on the CPU), and corpus cases
quoted from public reports (their case.json cites the thread).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
TRAIN = """\
import torch, torch.distributed as dist
dist.init_process_group("gloo")
for step in range(3):
    t = torch.ones(1); dist.all_reduce(t); print(f"step {step} loss {1.0 / (step + 1):.3f}", flush=True)
"""


def _plan(cli, log: Path) -> list[tuple[str, str]]:
    proc, report = cli(str(log), "--format", "json")
    assert report is not None, proc.stderr[-2000:]
    return [(f["fix_id"], f["kind"]) for f in report["fixes"]]


def _case(prefix: str) -> Path:
    return next(CORPUS.glob(f"{prefix}-*")) / "train.log"


def test_a_port_in_use_at_launch_puts_the_rendezvous_fix_before_every_inspection(tmp_path, cli):
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(TRAIN)
    with socket.socket() as held:  # the port a previous run still holds
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        log = tmp_path / "train.log"
        with log.open("wb") as out:
            proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
                                   "--master_port", str(port), "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=180, check=False)
    assert proc.returncode != 0 and "EADDRINUSE" in log.read_text(errors="replace")
    plan = _plan(cli, log)
    assert plan[0][0] == "check-rendezvous", plan  # was find-first-failing-rank: safe, so it outranked the named remedy
    assert [k for _, k in plan[1:3]] == ["inspect", "inspect"], plan


@pytest.mark.parametrize(("prefix", "first", "second"), [
    ("463", "request-quota-or-region", "grant-iam-role"),  # Azure: 'a total vCPU quota of 4 and cannot accomodate'
    ("726", "request-quota-or-region", "grant-iam-role"),  # Azure: NC-family vCPU quota 0
    ("036", "grant-iam-role", "inspect-failed-task"),  # Vertex: a service account lacks storage.objects permissions
    ("411", "grant-iam-role", "inspect-failed-task"),  # SageMaker: AccessDenied with an explicit deny
])
def test_a_refusals_own_words_choose_between_a_role_and_a_quota(cli, prefix, first, second):
    ids = [f for f, _ in _plan(cli, _case(prefix))]
    assert ids[:2] == [first, second], ids


def test_a_collective_that_failed_before_any_step_asks_about_the_transport(cli):
    ids = [f for f, _ in _plan(cli, _case("1632"))]  # nanoGPT across two nodes, fixed by NCCL_IB_DISABLE=1
    assert "check-network-transport" in ids[:3], ids
    # a watchdog's SeqNum=28956 says thousands of collectives ran before: the ranks had connected
    ids = [f for f, _ in _plan(cli, _case("1124"))]
    assert "check-network-transport" not in ids, ids


WRAPPED = """\
class CurriculumLoaderError(Exception):
    pass

class Modifier:
    def __init__(self, probability):
        self.probability = probability

for step in range(1, 4):
    print(f"step {step} loss {2.0 / step:.3f}", flush=True)
try:
    Modifier(probability=0.1, tag="x")
except TypeError as e:
    raise CurriculumLoaderError(f"could not initialize modifier 'Tags': {e}") from None  # only the wrapper is printed
"""


def test_an_error_no_rule_places_gets_the_usual_fix_its_words_point_to_and_no_narrow_one(tmp_path, cli):
    """Trial 11's reader A: an unexpected keyword wrapped in a library's own error got 'enable-input-grads' first (the
    class's usual fixes in name order)."""
    (tmp_path / "train.py").write_text(WRAPPED)
    log = tmp_path / "train.log"
    with log.open("wb") as out:
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=60, check=False)
    assert "unexpected keyword argument 'tag'" in log.read_text()
    ids = [f for f, _ in _plan(cli, log)]
    assert ids[0] == "fix-call-site", ids
    assert not {"enable-input-grads", "fix-lr-schedule", "fix-eval-config", "offline-local-model"} & set(ids), ids
    ids = [f for f, _ in _plan(cli, _case("1656"))]  # the public log: OpusTrainer's CurriculumLoaderError
    assert ids[0] == "fix-call-site", ids
