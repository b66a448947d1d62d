"""Several ranks in one log: each rank's collective, and no 'first rank to fail' made of milliseconds.

Corpus 002 is a real LlamaFactory log (hiyouga/LlamaFactory#2902) whose two ranks' NCCL watchdogs time out
in different collectives; the per-rank metric split is run for real in test_terminal_event.py.
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

CORPUS = Path(__file__).parents[1] / "corpus"


def _case(prefix: str) -> Path:
    return next(CORPUS.glob(f"{prefix}-*/train.log"))


def test_ranks_timed_out_in_different_collectives_is_named_a_desync_from_the_one_log():
    d = diagnose(DiagnoseRequest(target=str(_case("002"))))
    assert d.primary_cause is not None and d.primary_cause.value == "nccl-distributed"
    root = d.root_cause.root
    assert "rank 0 in SeqNum 1516 (ALLREDUCE, 25427968 elements)" in root and "rank 1 in SeqNum 1517 (ALLREDUCE, 1 elements)" in root
    assert "desync" in root
    assert "The first rank to fail" not in root  # both only timed out: which printed first says nothing
    assert d.insufficient_evidence is not None and "other ranks' logs" not in d.insufficient_evidence
    assert "TORCH_NCCL_DESYNC_DEBUG" in d.insufficient_evidence


def test_one_rank_timing_out_is_not_called_a_desync():
    d = diagnose(DiagnoseRequest(target=str(_case("208"))))
    assert d.primary_cause is not None and d.primary_cause.value == "nccl-distributed"
    assert "desync" not in d.root_cause.root


def test_sequence_numbers_of_a_rank_in_several_works_are_not_compared_across_ranks():
    """Corpus 001: rank 0 timed out in three works (SeqNum 96117, 96120, 96125), rank 7 in 64088. Sequence numbers
    count per process group and the lines do not name the group: no desync is claimed from them."""
    d = diagnose(DiagnoseRequest(target=str(_case("001"))))
    assert d.primary_cause is not None and d.primary_cause.value == "nccl-distributed"
    assert "desync" not in d.root_cause.root
