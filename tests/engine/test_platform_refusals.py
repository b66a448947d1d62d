"""Platform refusals read from their words, not one service's error code (issue 13, the platform abstentions).

Real logs from public reports, each abstained on when first scored: corpus 463 (Azure ML 'a total vCPU quota of 4 and
cannot accomodate'), 504 (GCP 'Required 'compute.regions.get' permission'), 557 (Azure ML 'You don't have permission
to alter this storage account'), 575 (SageMaker 'was unable to assume the role'); the workflow engine under Kubeflow:
513 (Argo 'child ... failed' and 'timed out waiting for the condition'), 514 (the KFP v2 launcher's 'failed to
execute component: failed to create task'), 550 (an Argo pod's 'exitCode: 137' and 'phase: Failed'). From batch
589-625: Azure's 'OutOfQuota: Not enough cluster CPU quota' (596) and 'exceeding quota limits of Core' (597), ZenML's
'Failed to run step model_deployer.' (609), Metaflow's metadata service answering 500 (612), XLA on TPU 'Attempting to
allocate 180.59M. That was not possible' (616), libmxnet's '[bt]' stack through abort() (608).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _case(prefix: str) -> Path:
    return next((TESTS / "corpus").glob(f"{prefix}-*")) / "train.log"


@pytest.mark.parametrize(("case", "cls", "line"), [
    ("463", "cloud-permissions-quota", "vCPU quota of 4"),
    ("504", "cloud-permissions-quota", "Required 'compute.regions.get' permission"),
    ("557", "cloud-permissions-quota", "You don't have permission"),
    ("575", "cloud-permissions-quota", "unable to assume the role"),
    ("513", "pipeline-orchestration", "kubeflow-tf-train"),
    ("514", "pipeline-orchestration", "failed to create task"),
    # batch 589-625, abstained on when first scored
    ("596", "cloud-permissions-quota", "OutOfQuota"),
    ("597", "cloud-permissions-quota", "exceeding quota limits of Core"),
    ("609", "pipeline-orchestration", "Failed to run step model_deployer"),
    ("612", "pipeline-orchestration", "failed (code 500)"),
    ("616", "oom", "That was not possible"),
    ("608", "process-crash", "abort+0x"),
    ("646", "cloud-permissions-quota", "QuotaExceeded"),  # batch 626-659: the code run together as one word
])
def test_a_refusal_is_named_from_its_words(case, cls, line):
    d = diagnose(DiagnoseRequest(target=str(_case(case))))
    assert d.primary_cause is not None and d.primary_cause.value == cls, d.root_cause
    assert line in d.root_cause.proximate, d.root_cause.proximate


def test_an_argo_pod_killed_with_exit_code_137_corpus_550():
    d = diagnose(DiagnoseRequest(target=str(_case("550"))))
    assert d.primary_cause is not None and d.primary_cause.value in ("pipeline-orchestration", "oom"), d.root_cause
