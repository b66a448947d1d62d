"""Real logs from public reports (tests/corpus), arranged as a grid: three runs of each, and a resubmission."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.grid.triage import triage

from tests.conftest import ROOT

CASES = ["001-nemo-nccl-watchdog-allreduce", "005-yolov3-cuda-oom-compute-loss", "021-gradnorm-tf-loss-nan-epoch-3451",
         "027-deit-imagenet-cannot-identify-image", "032-fasterrcnn-renamed-cli-args", "047-ronin-checkpoint-cannot-open-disk-full"]


@pytest.fixture(scope="module")
def corpus_grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    grid = tmp_path_factory.mktemp("corpus-grid")
    for case in CASES:
        for i in range(3):
            run = grid / f"{case[:3]}-seed{i}"
            run.mkdir()
            shutil.copy(ROOT / "tests" / "corpus" / case / "train.log", run / "train.log")
    # a resubmitted cell: the same job launched again, failing the same way at the same point
    for name in ("resub", "resub-retry1"):
        (grid / name).mkdir()
        shutil.copy(ROOT / "tests" / "corpus" / CASES[2] / "train.log", grid / name / "train.log")
    return grid


def test_runs_of_one_real_failure_share_a_group_with_check_failed_runs_class(corpus_grid: Path) -> None:
    report, _ = triage([str(corpus_grid)], workers=2)
    assert report.runs_total == len(CASES) * 3 + 1 and report.attempts_total == len(CASES) * 3 + 2
    by_run = {r.name: r for r in report.runs}
    for case in CASES:
        members = [f"{case[:3]}-seed{i}" for i in range(3)]
        group = next(g for g in report.groups if members[0] in g.runs)
        assert set(members) <= set(group.runs), case
        single = diagnose(DiagnoseRequest(target=str(corpus_grid / members[0])))
        assert group.failure_class == single.primary_cause, case
        assert by_run[members[0]].decision == single.decision, case
        expected = json.loads((ROOT / "tests" / "corpus" / case / "case.json").read_text())["primary_cause"]
        if single.primary_cause is not None and single.primary_cause.value == expected:
            assert group.failure_class is not None and group.failure_class.value == expected


def test_a_resubmitted_cell_that_failed_the_same_way_at_the_same_point_is_no_go(corpus_grid: Path) -> None:
    report, _ = triage([str(corpus_grid)], workers=1)
    run = next(r for r in report.runs if r.name == "resub")
    assert [a.attempt for a in run.attempts] == [0, 1]
    assert run.repeat is not None and run.repeat.kind.value == "same-failure-no-progress"
    assert run.decision is not None and run.decision.value == "NO-GO" and "relaunching will fail the same way" in run.decision_reason
