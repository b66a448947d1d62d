"""A job a person cancelled is not a job that hit its time limit (issue 13, item 1: what ended the run decides).

SLURM writes 'CANCELLED AT <time> DUE TO TIME LIMIT' when the limit ends a job, '... DUE TO NODE FAILURE' or
'... DUE TO PREEMPTION' when the cluster does, and a bare 'CANCELLED AT <time> ***' when someone ran scancel. Real
logs from public reports: healthy 289 (W&B sweep agents cancelled by their owner at epoch 1-3 of 50 while training
went on), corpus 792 (two jobs that printed one start-up line, then sat for 1 h and 4 h until their owner cancelled
them), corpus 969 (a tqdm bar slowing from 400 it/s to 9 s/it, then cancelled). And two lines that only looked like
a pipeline's: corpus 1050 (qlib's own 'qlib.workflow ... ValueError' logger after the child's bare 'Killed') and
corpus 687 (Argo's wait sidecar: 'level=fatal msg="path ... does not exist ... in archive').
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _log(kind: str, prefix: str) -> str:
    return str(next((TESTS / kind).glob(f"{prefix}-*")) / "train.log")


def test_owner_cancel_after_progress_names_no_failure():
    d = diagnose(DiagnoseRequest(target=_log("healthy", "289")))
    assert d.primary_cause is None
    assert d.run_status.value != "crashed"
    assert "cancelled the job" in (d.insufficient_evidence or "")
    assert "time limit" not in " ".join(e.text for e in d.evidence).lower()


@pytest.mark.parametrize("case", ["792", "969"])
def test_cancel_with_no_progress_before_it_is_a_weak_stall(case):
    d = diagnose(DiagnoseRequest(target=_log("corpus", case)))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled"
    assert d.primary_cause_confidence <= 0.45  # only where the log stops says so
    assert not any("job-time-limit" in e.text for e in d.evidence)


def test_a_programs_own_workflow_logger_is_not_a_kubernetes_failure():
    d = diagnose(DiagnoseRequest(target=_log("corpus", "1050")))
    assert d.primary_cause is not None and d.primary_cause.value == "oom"
    assert not any("k8s-pod-failure" in e.text for e in d.evidence)


def test_argo_sidecar_missing_output_path_is_the_pipelines():
    d = diagnose(DiagnoseRequest(target=_log("corpus", "687")))
    assert d.primary_cause is not None and d.primary_cause.value == "pipeline-orchestration"
    assert any("argo-executor-failure" in e.text for e in d.evidence)
