"""How multi-process runs end when no line says so plainly (issue 13, items 1 and 4), on real logs from public reports.

Corpus 1109: four ranks on GB200 each print the same traceback, '[rank2]:' first, '[rank0]:' after it; the second
copy is another rank's report of the same failure, not a clean second attempt of the run. Corpus 1114: two
MultiWorkerMirroredStrategy workers start their gRPC servers and stop printing before the first step; corpus 481:
eight ranks stop in NCCL's channel set-up. Healthy 256: a DeepSpeed launcher's echo of its settings (world size,
CUDA_VISIBLE_DEVICES) cut before the workers printed anything, which is a paste, not evidence of a hang. Corpus 1116:
NCCL's bootstrap retrying 'Connection refused'. Corpus 1115: RaySGD's gloo timeout, then older Ray's 'A worker died
or was killed while executing task <id>' (logged at WARNING).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _log(kind: str, prefix: str) -> str:
    return str(next((TESTS / kind).glob(f"{prefix}-*")) / "train.log")


def test_another_ranks_copy_of_a_traceback_is_no_retry():
    d = diagnose(DiagnoseRequest(target=_log("corpus", "1109")))
    assert d.run_status.value == "crashed"
    assert d.primary_cause is not None and d.primary_cause.value == "nccl-distributed"


@pytest.mark.parametrize("case", ["1114", "481"])
def test_a_log_that_stops_after_the_processes_met_is_a_weak_stall(case):
    d = diagnose(DiagnoseRequest(target=_log("corpus", case)))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled"
    assert d.primary_cause_confidence <= 0.45
    assert d.run_status.value == "hung"


def test_a_launchers_echo_of_its_settings_is_no_evidence_of_a_hang():
    d = diagnose(DiagnoseRequest(target=_log("healthy", "256")))
    assert d.primary_cause is None


@pytest.mark.parametrize(("case", "cls"), [("1116", "nccl-distributed"), ("1115", "process-crash")])
def test_retried_connects_and_a_dead_ray_worker_are_named(case, cls):
    d = diagnose(DiagnoseRequest(target=_log("corpus", case)))
    assert d.primary_cause is not None and d.primary_cause.value == cls
    assert d.run_status.value == "crashed"
