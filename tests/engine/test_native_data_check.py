"""A native CHECK that failed inside the framework's data loader is a data failure, not an anonymous abort.

Real log: corpus 579 (apache/mxnet, train_imagenet.py on 6 GPUs aborting in epoch 7: src/io/./iter_batchloader.h:100
'Check failed: base_->Next() number of input must be bigger than batch size', then 'terminate called' and
'Aborted'); corpus 261 (XLA's shape_tree.cc check, no data component) stays a native crash.
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _case(prefix: str) -> Path:
    return next((TESTS / "corpus").glob(f"{prefix}-*")) / "train.log"


def test_a_check_failed_in_the_batch_loader_is_data_pipeline_corpus_579():
    d = diagnose(DiagnoseRequest(target=str(_case("579"))))
    assert d.primary_cause is not None and d.primary_cause.value == "data-pipeline", d.root_cause
    assert "iter_batchloader.h" in d.root_cause.proximate


def test_a_check_failed_elsewhere_in_native_code_stays_a_crash_corpus_261():
    d = diagnose(DiagnoseRequest(target=str(_case("261"))))
    assert d.primary_cause is not None and d.primary_cause.value != "data-pipeline"
