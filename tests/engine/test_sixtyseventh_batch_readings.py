"""Batch 67's false alarm read as a general behaviour (scored at db580b8 before any change): a long, noisy validation
curve whose single best evaluation is among its last three has not climbed off its best, whatever the medians of its
stretches say (0931: TF-slim Inception on 5 classes, 51 evaluations, a best validation loss of 0.28 at the second-to-last
and one bounce to 0.58 at the last, read as memorisation at 0.63; its validation accuracy was at its best there too).

The case is a verbatim committed log (it fails on db580b8). The controls are real runs elsewhere that still read as
memorisation: tests/engine/test_stuck_and_memorising.py (a validation loss rising at every evaluation while training
falls, a long noisy curve read by its level), tests/engine/test_accuracy_gap.py and the lab's shard-zero run."""

from __future__ import annotations

from tests.engine.batchcase import case, verdict


def test_a_noisy_curve_that_just_reached_its_best_is_no_memorisation():
    assert verdict(case("0931", "healthy"))[0] is None
