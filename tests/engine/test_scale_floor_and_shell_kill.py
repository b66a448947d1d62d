"""Two endings read from what they mean, each abstained on when first scored (issue 13, batch 555-588).

Real logs: corpus 561 (ymcui/Chinese-LLaMA-Alpaca: DeepSpeed fp16 halving its loss scale at every step from 64 down to
'Attempted loss scale: 4, reducing to 2', logged at INFO level, one halving from its floor of 1) and 563
(PaddlePaddle v1: the wrapper script's own report 'paddle_local: line 109: 13220 Killed' as memory grew to 7 GB).
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _case(prefix: str) -> Path:
    return next((TESTS / "corpus").glob(f"{prefix}-*")) / "train.log"


def test_a_loss_scale_at_its_floor_is_nan_inf_even_at_info_level_corpus_561():
    d = diagnose(DiagnoseRequest(target=str(_case("561"))))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", d.root_cause
    assert "reducing to 2" in d.root_cause.proximate


def test_a_shell_scripts_killed_report_is_a_sigkill_corpus_563():
    d = diagnose(DiagnoseRequest(target=str(_case("563"))))
    assert d.primary_cause is not None and d.primary_cause.value in ("oom", "process-crash"), d.root_cause
    assert "13220 Killed" in d.root_cause.proximate
