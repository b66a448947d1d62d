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
            run = grid / f"{case.split('-')[0]}-seed{i}"
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
        members = [f"{case.split('-')[0]}-seed{i}" for i in range(3)]
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


def test_retry_logs_in_one_run_directory_and_in_a_glob_are_attempts(tmp_path: Path) -> None:
    log = ROOT / "tests" / "corpus" / CASES[1] / "train.log"
    grid = tmp_path / "grid"
    (grid / "cell-a").mkdir(parents=True)
    shutil.copy(log, grid / "cell-a" / "train.log")
    shutil.copy(log, grid / "cell-a" / "train.retry1.log")  # relaunched into the same directory
    flat = tmp_path / "logs"
    flat.mkdir()
    shutil.copy(log, flat / "cell-07.log")
    shutil.copy(log, flat / "cell-07-retry1.log")
    shutil.copy(ROOT / "tests" / "corpus" / CASES[3] / "train.log", flat / "cell-08.log")
    (grid / "cell-b" / "attempt-2").mkdir(parents=True)
    shutil.copy(log, grid / "cell-b" / "train.log")  # the first launch logged in the run directory
    shutil.copy(log, grid / "cell-b" / "attempt-2" / "train.log")
    report, _ = triage([str(grid), str(flat / "*.log")], workers=1)
    runs = {r.name: r for r in report.runs}
    assert set(runs) == {"cell-a", "cell-b", "cell-07", "cell-08"}
    assert [a.attempt for a in runs["cell-b"].attempts] == [0, 2]
    for name in ("cell-a", "cell-07"):
        assert [a.attempt for a in runs[name].attempts] == [0, 1], name
        assert runs[name].repeat is not None and runs[name].repeat.kind.value == "same-failure-no-progress", name
    assert runs["cell-08"].repeat is None and runs["cell-a"].fingerprint == runs["cell-07"].fingerprint


def test_the_deadline_stops_the_triage_with_what_is_done_and_says_so(tmp_path: Path) -> None:
    grid = tmp_path / "grid"
    grid.mkdir()
    for i in range(300):
        shutil.copy(ROOT / "tests" / "corpus" / CASES[i % len(CASES)] / "train.log", grid / f"run-{i:03d}.log")
    for workers in (1, 2):
        report, _ = triage([str(grid)], workers=workers, deadline_s=1.0)
        assert report.runs_total == 300 and report.complete is False
        assert len(report.runs) < 300 and sum(report.counts.values()) == len(report.runs)
        assert any("deadline of 1 s passed" in n for n in report.notes)
        assert report.elapsed_s < 30
