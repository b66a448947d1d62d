"""Behaviours batch 589-625 showed (issue 13), each on the real log that showed it, abstained on or got wrong when scored.

- corpus 613 (RLinf, an FSDP resume through torch.distributed.checkpoint whose saved embed_tokens is 2-D and the model's
  flat): an exception raised in the DCP planner is a checkpoint failure, not a collective one, although its frames
  are under torch/distributed/.
- corpus 605 (a Whisper fine-tune at lr 3e-3): eval_loss nan, then HF Trainer logs a training loss of exactly 0.0
  after 2.41 - its logging_nan_inf_filter drops nan losses, so the training went nan too: nan-inf, not a broken
  evaluation.
- healthy 074 (a DDP run with c10d IPv6 socket warnings): its bar's frames were copied run together, '0/28 ... 28/28';
  the bar's newest frame, not its first, says where the run got to: no hang at the first batch.
- healthy 087 and 094: completion said in Chinese ('预训练任务圆满结束 (总耗时: 1.46 小时)') and Indonesian
  ('Training selesai').
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.analyse.stops import last_frame
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _log(suite: str, prefix: str) -> Path:
    return next((TESTS / suite).glob(f"{prefix}-*")) / "train.log"


def test_an_exception_in_the_dcp_load_planner_is_io_checkpoint_corpus_613():
    d = diagnose(DiagnoseRequest(target=str(_log("corpus", "613"))))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint", d.root_cause
    assert "Size mismatch between saved" in d.root_cause.proximate


def test_a_training_loss_of_exactly_zero_after_an_eval_nan_is_nan_inf_corpus_605():
    d = diagnose(DiagnoseRequest(target=str(_log("corpus", "605"))))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", d.root_cause
    assert "logging_nan_inf_filter" in d.root_cause.proximate or any(
        "logging_nan_inf_filter" in a.detail for a in d.anomalies)


def test_a_bar_read_at_its_newest_frame():
    assert last_frame("Training:   0%|  | 0/28 [00:00<?]Training:   4%|▎ | 1/28 [00:53<24:01]Training: 100%|█| 28/28 [01:10<00:00]"
                      ).endswith("28/28 [01:10<00:00]")
    assert last_frame("Epoch 1:  10%|█ | 5/50\rEpoch 1:  12%|█▏ | 6/50\r") == "Epoch 1:  12%|█▏ | 6/50"
    assert last_frame("step 0 loss 2.3") == "step 0 loss 2.3"


def test_a_bar_past_its_first_batch_is_no_start_up_hang_healthy_074():
    d = diagnose(DiagnoseRequest(target=str(_log("healthy", "074"))))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value in ("running", "unknown")


@pytest.mark.parametrize("case", ["087", "094"])
def test_completion_said_in_another_language(case):
    d = diagnose(DiagnoseRequest(target=str(_log("healthy", case))))
    assert d.primary_cause is None and d.run_status.value == "completed"
