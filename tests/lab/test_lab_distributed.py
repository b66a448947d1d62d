"""nccl-distributed, for real: two Gloo ranks on the CPU, one fails first, diagnosed from both logs.

Each rank writes its own log (rank0.log, rank1.log) as torchrun --log-dir does; the diagnosis
of the run directory must name the rank that failed first and its own error as the root, and
treat the other rank's collective failure as the consequence.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.lab.harness import run


def _line_of(log: Path, needle: str) -> int:
    """1-based number of the first line of the real log that holds `needle`."""
    for i, line in enumerate(log.read_text(errors="replace").splitlines(), start=1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in {log}:\n{log.read_text(errors='replace')[-3000:]}")


def _why(report: dict) -> str:
    return json.dumps({k: report[k] for k in ("primary_cause", "root_cause", "ruled_out", "sources")}, indent=1)[:4000]


def _fix(report: dict, fix_id: str) -> dict:
    fix = next((f for f in report["fixes"] if f["fix_id"] == fix_id), None)
    assert fix is not None, [f["fix_id"] for f in report["fixes"]]
    return fix


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The three runs at once (most of their time is waiting on a peer or a timeout)."""
    variants = {"raise": ("--mode", "raise"), "hang": ("--mode", "hang"), "interleaved": ("--mode", "raise", "--combined")}
    dirs = {k: tmp_path_factory.mktemp(f"dist-{k}") for k in variants}
    with ThreadPoolExecutor(len(variants)) as pool:
        done = {k: pool.submit(run, "distributed_ranks", dirs[k], *a, log_name="launcher.log", timeout=120) for k, a in variants.items()}
        for k, f in done.items():
            assert f.result().returncode == 1, (dirs[k] / "launcher.log").read_text()
    return dirs


def test_rank_that_raised_is_the_root_and_the_collective_failure_is_secondary(runs, cli):
    d = runs["raise"]
    rank1, rank0 = d / "rank1.log", d / "rank0.log"
    err_line = _line_of(rank1, "ValueError: could not convert string to float")
    peer_line = _line_of(rank0, "[rank0]: RuntimeError:")  # 'Connection closed by peer', or a timeout on a slow machine
    proc, rep = cli(str(d))
    assert proc.returncode == 0, proc.stderr
    assert rep["primary_cause"] == "data-pipeline", _why(rep)
    assert rep["run_status"] == "crashed"
    assert rep["root_cause"]["proximate_line"]["source"] == str(rank1)
    assert rep["root_cause"]["proximate_line"]["line_no"] == err_line
    assert rep["root_cause"]["proximate"].startswith(f"rank1.log:{err_line}: ValueError")
    assert "The first rank to fail was rank1.log: its own error" in rep["root_cause"]["root"], _why(rep)
    assert f"rank0.log failed after it in a collective (line {peer_line}" in rep["root_cause"]["root"]
    nccl = next(r for r in rep["ruled_out"] if r["failure_class"] == "nccl-distributed")
    assert nccl["reason"].startswith("secondary:")
    fix = _fix(rep, "validate-dataset")
    assert fix["risk"] == "safe" and "zero bad samples" in fix["validation"]
    assert rep["decision"] == "NO-GO"


def test_rank_that_hung_is_named_first_and_the_timeout_is_the_symptom(runs, cli):
    d = runs["hang"]
    rank1, rank0 = d / "rank1.log", d / "rank0.log"
    timeout_line = _line_of(rank0, "Timed out waiting 4000ms for recv operation")
    stop_line = _line_of(rank1, "step 5 loss")
    proc, rep = cli(str(d))
    assert proc.returncode == 0, proc.stderr
    assert rep["primary_cause"] == "nccl-distributed", _why(rep)
    assert rep["run_status"] == "crashed"
    assert rep["root_cause"]["proximate_line"] == {"source": str(rank0), "line_no": timeout_line,
                                                  "text": rep["root_cause"]["proximate_line"]["text"]}
    assert "Timed out waiting 4000ms" in rep["root_cause"]["proximate_line"]["text"]
    root = rep["root_cause"]["root"]
    assert f"The first rank to fail was rank1.log: it stopped making progress at line {stop_line} after step 5" in root, _why(rep)
    assert "with no error of its own" in root
    assert f"rank0.log failed after it in a collective (line {timeout_line}" in root
    fix = _fix(rep, "find-first-failing-rank")
    assert fix["rank"] == 1 and fix["risk"] == "safe" and "before the collective timed out" in fix["validation"]
    assert rep["decision"] == "NO-GO"


def test_one_rank_log_alone_asks_for_the_other_ranks(runs, cli):
    proc, rep = cli(str(runs["hang"] / "rank0.log"))
    assert proc.returncode == 0, proc.stderr
    assert rep["primary_cause"] == "nccl-distributed"
    assert "other ranks' logs" in (rep["insufficient_evidence"] or "")
    assert rep["decision"] == "NO-GO"


def test_ranks_interleaved_in_one_log_are_told_apart_by_line_order(runs, cli):
    log = runs["interleaved"] / "launcher.log"
    err_line = _line_of(log, "[rank1]: ValueError: could not convert string to float")
    peer_line = _line_of(log, "[rank0]: RuntimeError:")
    assert peer_line > err_line
    proc, rep = cli(str(log))
    assert proc.returncode == 0, proc.stderr
    assert rep["primary_cause"] == "data-pipeline"
    assert rep["run_status"] == "crashed"
    assert rep["root_cause"]["proximate_line"]["line_no"] == err_line
    root = rep["root_cause"]["root"]
    assert f"The first rank to fail was launcher.log [rank1]: its own error at line {err_line}" in root
    assert f"launcher.log [rank0] failed after it in a collective (line {peer_line}" in root
    assert rep["decision"] == "NO-GO"
