"""triage-runs on a grid of real runs (tests/grid/conftest.py), through the real CLI in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.conftest import ROOT
from tests.grid.conftest import Grid

pytestmark = pytest.mark.slow
SCHEMA = json.loads((ROOT / "schemas" / "triage-runs.schema.json").read_text())


def triage_cli(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ml_skills.cli", "triage-runs", *args], check=False, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


@pytest.fixture(scope="module")
def triaged(real_grid: Grid, tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path_factory.mktemp("triage-out")
    proc = triage_cli(str(real_grid.runs), "--workers", "2", "--expect", str(real_grid.expect_csv),
                      "--results", str(real_grid.results / "*.json"), "--out-dir", str(out), cwd=out)
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads((out / "triage-runs.json").read_text())


def group_of(report: dict, run: str) -> dict:
    return next(g for g in report["groups"] if run in g["runs"])


def test_report_validates_against_the_generated_schema(triaged) -> None:
    _, report = triaged
    jsonschema.validate(report, SCHEMA)
    assert report["runs_total"] == 27 and report["attempts_total"] == 29 and report["complete"] is True


def test_cells_that_failed_the_same_way_share_one_group_whatever_their_numbers(triaged, real_grid: Grid) -> None:
    _, report = triaged
    nan = group_of(report, real_grid.families["nan"][0])
    # five learning rates and seeds, diverging at different steps with different values, and the relaunched cell
    assert sorted(nan["runs"]) == sorted(real_grid.families["nan"] + ["relaunch-nan"])
    assert nan["outcome"] == "failed" and nan["failure_class"] == "nan-inf"
    keyerr = group_of(report, "adamw-lr0.01")
    assert sorted(keyerr["runs"]) == sorted(real_grid.families["keyerror"]) and keyerr["failure_class"] == "config-error"
    assert "KeyError: 'adamw'" in keyerr["example_line"]
    nodata = group_of(report, "shard3")  # two different missing shard paths: one fingerprint
    assert sorted(nodata["runs"]) == ["shard11", "shard3"]
    killed = group_of(report, "killed-s1")
    assert sorted(killed["runs"]) == ["killed-s1", "relaunch-kill"]
    fps = [nan["fingerprint"], keyerr["fingerprint"], nodata["fingerprint"], killed["fingerprint"], group_of(report, "summary-crash")["fingerprint"]]
    assert len(set(fps)) == 5, "different failures must not share a fingerprint"


def test_completed_runs_are_their_own_row_and_groups_come_biggest_first(triaged, real_grid: Grid) -> None:
    _, report = triaged
    done = group_of(report, "ok-lr0.02-s1")
    assert done["outcome"] == "completed" and done["fingerprint"] is None
    assert sorted(done["runs"]) == sorted(real_grid.families["ok"] + real_grid.families["elsewhere"])
    failed = [g["count"] for g in report["groups"] if g["outcome"] == "failed"]
    assert failed == sorted(failed, reverse=True) and failed[0] == 6
    assert report["counts"] == {"failed": 14, "completed": 13, "running": 0, "undecided": 0, "unreadable": 0}
    assert [g["outcome"] for g in report["groups"]][-1] == "completed"


def test_groups_carry_seen_times_shared_fixes_and_compute_lost(triaged) -> None:
    _, report = triaged
    for g in (g for g in report["groups"] if g["outcome"] == "failed"):
        assert g["first_seen"] <= g["last_seen"]
        assert g["fixes"], g["signature"]
        assert g["duration_known"] == g["count"] and g["compute_lost_s"] is not None  # every cell's log is timestamped
        assert sum(g["decisions"].values()) == g["count"]


def test_a_relaunched_deterministic_crash_is_no_go_and_a_transient_kill_that_progressed_is_go(triaged) -> None:
    _, report = triaged
    runs = {r["name"]: r for r in report["runs"]}
    nan, kill = runs["relaunch-nan"], runs["relaunch-kill"]
    assert [a["attempt"] for a in nan["attempts"]] == [1, 2]
    assert nan["repeat"]["kind"] == "same-failure-no-progress" and nan["decision"] == "NO-GO"
    assert "relaunching will fail the same way" in nan["decision_reason"]
    assert nan["repeat"]["previous_step"] == nan["repeat"]["last_step"]
    assert kill["repeat"]["kind"] == "same-failure-progressed" and kill["decision"] == "GO"
    assert kill["repeat"]["previous_step"] == 30 and kill["repeat"]["last_step"] == 70
    # the same cell launched once is left to the engine's own decision
    assert runs["killed-s1"]["repeat"] is None and runs["killed-s1"]["attempts"] == []


def test_expected_grid_finds_the_cell_never_run_the_result_elsewhere_and_the_result_of_a_failed_run(triaged, real_grid: Grid) -> None:
    _, report = triaged
    e = report["expect"]
    assert e["expected"] == 28
    assert e["cells_without_run"] == ["never-ran"]
    assert e["completed_without_result"] == ["ok-elsewhere"]
    assert [Path(p).name for p in e["results_of_failed_runs"]] == ["summary-crash.json"]
    failed = {r["name"] for r in report["runs"] if r["outcome"] == "failed"} - {"summary-crash"}
    assert set(e["runs_without_result"]) == failed | {"ok-elsewhere"}


def test_text_summary_is_ordered_by_group_size_and_stderr_stays_quiet_off_a_terminal(triaged) -> None:
    proc, report = triaged
    assert proc.stderr == ""  # no progress line when stderr is not a terminal
    out = proc.stdout
    positions = [out.index(f"fingerprint {g['fingerprint']}") for g in report["groups"] if g["outcome"] == "failed"]
    assert positions == sorted(positions)
    assert "relaunching will fail the same way" in out and "cells with no run: 1 (never-ran)" in out
    assert out.rstrip().endswith("triage-runs.json")


def test_each_run_gets_the_same_verdict_as_check_failed_run_on_it(triaged, real_grid: Grid) -> None:
    """One engine: the grid's class and decision for a single-attempt run are check-failed-run's."""
    _, report = triaged
    runs = {r["name"]: r for r in report["runs"]}
    for name in ("nan-lr300-s1", "adamw-lr0.05", "shard11", "killed-s1", "summary-crash", "ok-lr0.05-s4"):
        d = diagnose(DiagnoseRequest(target=str(real_grid.runs / name)))
        assert runs[name]["failure_class"] == (d.primary_cause.value if d.primary_cause else None), name
        assert runs[name]["decision"] == d.decision.value, name


def test_one_worker_and_two_workers_give_the_same_groups(real_grid: Grid, triaged, tmp_path: Path) -> None:
    _, two = triaged
    proc = triage_cli(str(real_grid.runs), "--workers", "1", "--out-dir", str(tmp_path), "--format", "json", cwd=tmp_path)
    one = json.loads(proc.stdout)
    assert one["backend"] == "inline" and two["backend"] == "local"
    key = ["outcome", "fingerprint", "signature", "count", "runs", "example_run", "decisions", "relaunch_blocked"]
    assert [{k: g[k] for k in key} for g in one["groups"]] == [{k: g[k] for k in key} for g in two["groups"]]


def test_fail_on_nogo_exits_1_and_since_in_the_future_leaves_every_run_out(real_grid: Grid, tmp_path: Path) -> None:
    proc = triage_cli(str(real_grid.runs), "--workers", "2", "--fail-on-nogo", "--out-dir", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1
    proc = triage_cli(str(real_grid.runs), "--since", "2999-01-01", "--out-dir", str(tmp_path), "--format", "json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert report["runs_total"] == 0 and any("27 runs last written before --since" in n for n in report["notes"])
    proc = triage_cli(str(real_grid.runs), "--since", "1h", "--out-dir", str(tmp_path), "--format", "json", cwd=tmp_path)
    assert json.loads(proc.stdout)["runs_total"] == 27


def test_a_yaml_grid_and_a_glob_of_result_files_are_expected_grids_too(real_grid: Grid, triaged, tmp_path: Path) -> None:
    from ml_skills.errors import InputError
    from ml_skills.grid.expect import check_expected
    from ml_skills.grid.models import RunRecord

    _, report = triaged
    runs = [RunRecord.model_validate(r) for r in report["runs"]]
    names = [line.split(",")[0] for line in real_grid.expect_csv.read_text().splitlines()[1:]]
    grid = tmp_path / "grid.yaml"
    grid.write_text("cells:\n" + "".join(f"  - name: {n}\n" for n in names))
    e = check_expected(str(grid), str(real_grid.results / "*.json"), runs)
    assert e.expected == 28 and e.cells_without_run == ["never-ran"] and e.completed_without_result == ["ok-elsewhere"]
    by_glob = check_expected(str(real_grid.results / "*.json"), None, runs)  # the results say which cells there are
    assert by_glob.expected == 13 and by_glob.cells_without_run == [] and by_glob.results_without_run == []
    assert [Path(p).name for p in by_glob.results_of_failed_runs] == ["summary-crash.json"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("cells: {a: [1, 2}\n")
    with pytest.raises(InputError, match="not valid YAML"):
        check_expected(str(bad), None, runs)


def test_jsonl_streams_one_line_per_run_as_it_finishes(real_grid: Grid, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ml_skills.cli", "triage-runs", str(real_grid.runs), "--workers", "2", "--format", "jsonl",
                             "--out-dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    assert proc.stdout is not None
    first = proc.stdout.readline()  # arrives while the rest of the grid is still being diagnosed
    still_running = proc.poll() is None
    rest = proc.stdout.read()
    assert proc.wait(timeout=180) == 0
    lines = [json.loads(x) for x in [first, *rest.splitlines()] if x.strip()]
    assert len(lines) == 27 and {x["name"] for x in lines} == {r["name"] for r in json.loads((tmp_path / "triage-runs.json").read_text())["runs"]}
    assert still_running


def test_plot_draws_the_groups_over_time(real_grid: Grid, tmp_path: Path) -> None:
    proc = triage_cli(str(real_grid.runs), "--plot", "--out-dir", str(tmp_path), "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    png = tmp_path / "triage-runs.png"
    assert json.loads(proc.stdout)["plot"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
