"""Catalog fixes that the corpus showed missing, each on the real log whose thread names it, and absent where it does not apply.

The corpus cases (tests/corpus/*/case.json cites each thread) were labelled `fix_that_worked: []` with a
`fix_note` naming the missing fix; the fixes were added to catalog/fixes.toml, named by the signatures of
their failure (a capacity stockout, an unauthenticated call, a quota or limit, a truncated archive, a Hub that
cannot be reached, an XLA program that does not fit), and the labels now name them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

CORPUS = Path(__file__).parents[1] / "corpus"


def _fixes(prefix: str) -> list[str]:
    case = next(p for p in CORPUS.iterdir() if p.name.startswith(prefix))
    return [f.fix_id for f in diagnose(DiagnoseRequest(target=str(case / "train.log"))).fixes]


@pytest.mark.parametrize(("prefix", "fix", "best"), [
    ("270-", "retry-capacity-later", 1),  # SageMaker CapacityError: the provider's capacity, not a quota: retry
    ("197-", "authenticate-job", 1),  # an anonymous caller: no credentials at all, so no IAM role can help first
    ("008-", "request-fewer-resources", 2),  # ResourceLimitExceeded: raise the limit, or ask for less
    ("474-", "redownload-verify-file", 3),  # a downloaded checkpoint cut short: unexpected EOF
    ("144-", "offline-local-model", 1),  # 'We couldn't connect to huggingface.co'
    ("075-", "larger-accelerator", 5),  # XLA's buffer assignment: the program needs more than the GPU has
    ("176-", "larger-accelerator", 5),  # XLA:TPU compile permanent error, out of HBM
])
def test_the_fix_that_worked_is_in_the_plan(prefix: str, fix: str, best: int) -> None:
    fixes = _fixes(prefix)
    assert fix in fixes and fixes.index(fix) < best, fixes


def test_an_unauthenticated_call_gets_credentials_before_a_role() -> None:
    fixes = _fixes("197-")
    assert fixes.index("authenticate-job") < fixes.index("grant-iam-role")


@pytest.mark.parametrize("prefix", [
    "163-",  # an XLA out-of-memory after 9 training steps: the program fits, at a smaller size
    "005-",  # a CUDA out-of-memory in compute_loss: nothing says the model cannot fit the GPU at all
    "125-",  # an evaluation out-of-memory on one line
])
def test_no_larger_accelerator_where_nothing_says_the_model_cannot_fit(prefix: str) -> None:
    assert "larger-accelerator" not in _fixes(prefix)


def test_a_quota_case_whose_label_is_raising_it_keeps_it_first() -> None:
    for prefix in ("006-", "273-", "276-"):
        assert _fixes(prefix)[0] == "request-quota-or-region"


@pytest.mark.parametrize("prefix", [
    "309-",  # 'Search for history checkpoints...', then the run's own truncated checkpoint (a disk filled during its save)
    "540-",  # 'Resume: loading checkpoints/SIM/ckpt_best.pth'
])
def test_a_truncated_checkpoint_the_run_resumes_from_is_not_redownloaded(prefix: str) -> None:
    fixes = _fixes(prefix)
    assert "redownload-verify-file" not in fixes and "atomic-checkpoint-save" in fixes, fixes


def _plan_ids(case: str) -> list[str]:
    log = next((Path(__file__).resolve().parents[1] / "corpus").glob(f"{case}-*")) / "train.log"
    return [f.fix_id for f in diagnose(DiagnoseRequest(target=str(log))).fixes]


def test_an_oom_while_placing_the_weights_gets_no_batch_advice_corpus_603():
    """axolotl's QLoRA load: CUDA OOM in accelerate's set_module_tensor_to_device, before any step (the second user
    trial's complaint: 'halve the batch' for an OOM while loading the model)."""
    ids = _plan_ids("603")
    assert "reduce-batch-grad-accum" not in ids and "activation-checkpointing" not in ids, ids
    assert "larger-accelerator" in ids[:3], ids


def test_an_oom_inside_the_training_step_keeps_the_batch_advice_corpus_005():
    assert "reduce-batch-grad-accum" in _plan_ids("005")[:3]
