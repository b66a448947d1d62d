"""triage-runs on grids that fight back: nothing there, runs that cannot be read, symlink loops, thousands of logs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.grid.test_real_grid import triage_cli

SMALL_LOGS = [p for p in sorted((ROOT / "tests" / "corpus").glob("*/train.log")) if p.stat().st_size < 3000][:8]


def test_an_empty_grid_is_a_clear_error_not_an_empty_report(tmp_path: Path) -> None:
    (tmp_path / "grid").mkdir()
    proc = triage_cli(str(tmp_path / "grid"), "--out-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("ml-skills: error: no runs under") and "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "triage-runs.json").exists()
    proc = triage_cli(str(tmp_path / "nowhere"), "--out-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2 and "no file or directory at" in proc.stderr


def test_unreadable_runs_and_symlink_loops_are_rows_of_their_own_and_the_rest_is_triaged(tmp_path: Path) -> None:
    grid = tmp_path / "grid"
    good = grid / "good"
    good.mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "nan-loss" / "train.log", good / "train.log")
    (grid / "loop-a").symlink_to(grid / "loop-b")  # a -> b -> a
    (grid / "loop-b").symlink_to(grid / "loop-a")
    (grid / "self").symlink_to(grid / "self")
    (grid / "gone").symlink_to(tmp_path / "deleted-run")
    fifo_run = grid / "fifo"
    fifo_run.mkdir()
    os.mkfifo(fifo_run / "train.log")  # opening it would block until a writer came
    (grid / "binary").mkdir()
    (grid / "binary" / "train.log").write_bytes(bytes(range(256)) * 400)
    inner = grid / "inner-loop"
    inner.mkdir()
    shutil.copy(ROOT / "examples" / "nan-loss" / "train.log", inner / "train.log")
    (inner / "again").symlink_to(inner)  # a loop below a run is not followed
    proc = triage_cli(str(grid), "--workers", "2", "--out-dir", str(tmp_path / "out"), "--format", "json", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    runs = {r["name"]: r for r in report["runs"]}
    assert set(runs) == {"good", "loop-a", "loop-b", "self", "gone", "fifo", "binary", "inner-loop"}
    assert runs["good"]["failure_class"] == runs["inner-loop"]["failure_class"] == "nan-inf"
    for name in ("loop-a", "loop-b", "self"):
        assert runs[name]["outcome"] == "unreadable" and "symlink loop" in runs[name]["error"], runs[name]
    assert runs["gone"]["outcome"] == "unreadable" and "dangling symlink" in runs["gone"]["error"]
    assert runs["fifo"]["outcome"] in ("unreadable", "undecided") and runs["binary"]["outcome"] in ("unreadable", "undecided")
    unreadable = next(g for g in report["groups"] if g["outcome"] == "unreadable")
    assert unreadable["count"] >= 4


def _tiny_grid(root: Path, n: int) -> Path:
    root.mkdir()
    for i in range(n):
        shutil.copy(SMALL_LOGS[i % len(SMALL_LOGS)], root / f"run-{i:05d}.log")
    return root


MEASURE = """
import json, resource, sys
from ml_skills.grid.triage import triage
report, _ = triage([sys.argv[1]], workers=2)
print(json.dumps({"runs": report.runs_total, "groups": [(g.fingerprint, g.count) for g in report.groups],
                  "self_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "workers_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _measure(grid: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(grid)], check=False, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_two_thousand_tiny_logs_finish_with_memory_flat_in_the_number_of_runs(tmp_path: Path) -> None:
    small = _measure(_tiny_grid(tmp_path / "small", 200))
    big = _measure(_tiny_grid(tmp_path / "big", 2000))
    assert small["runs"] == 200 and big["runs"] == 2000
    # the same eight logs over and over: the same groups, ten times the size
    assert sorted(fp for fp, _ in small["groups"]) == sorted(fp for fp, _ in big["groups"])
    assert sorted(c * 10 for _, c in small["groups"]) == sorted(c for _, c in big["groups"])
    # ten times the runs: the parent keeps one small record per run, a worker one diagnosis at a time
    assert big["self_mb"] - small["self_mb"] < 40, (small, big)
    assert big["workers_mb"] < small["workers_mb"] * 1.25 + 10, (small, big)


def test_on_a_terminal_a_progress_line_counts_runs_and_groups_on_stderr_only(tmp_path: Path) -> None:
    import pty

    grid = _tiny_grid(tmp_path / "grid", 40)
    main, sub = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ml_skills.cli", "triage-runs", str(grid), "--workers", "2", "--out-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=sub, text=True, env=dict(os.environ))
    os.close(sub)
    out, _ = proc.communicate(timeout=300)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    assert proc.returncode == 0
    text = seen.decode()
    assert "triage-runs (" in text and "failed in" in text and "of 40 runs" in text, text[-500:]
    assert text.endswith("\r\x1b[K")  # the line is cleared before the summary
    assert "\r" not in out and out.startswith("triage-runs: 40 runs")


def test_a_missing_expect_file_is_said_before_any_run_is_diagnosed(tmp_path: Path) -> None:
    grid = _tiny_grid(tmp_path / "grid", 3)
    proc = triage_cli(str(grid), "--expect", str(tmp_path / "nope.csv"), "--format", "jsonl", "--out-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2 and "no grid file at" in proc.stderr
    assert proc.stdout == ""  # no run was diagnosed (jsonl would have streamed it)
