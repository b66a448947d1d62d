"""--expect with the grid a sweep launcher iterates: a CSV of parameters under a header ('lr,batch_size,seed'), no name
column, and run folders named by their values ('lr0.003_bs32_s1'). The thirteenth user trial's sweep: the header was
read as a cell and only the first column was compared, so all 24 cells were reported as 'lr, 0.003, 0.01, ...' with no
run; each row is a cell, found by the run whose name carries every value of it.

Real runs: a plain-Python training loop launched per cell, one cell left out as a launcher that stopped early would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ml_skills.grid.expect import read_grid

TRAIN = """
import json, sys
lr, bs, seed = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
w, loss = 0.0, 0.0
for step in range(1, 41):
    loss = (w - 3.0) ** 2
    w -= lr * 2 * (w - 3.0) * bs / 32
    if step % 10 == 0:
        print(f"step {step}/40 loss {loss:.5f} lr {lr}", flush=True)
json.dump({"loss": loss}, open("results.json", "w"))
print("Training complete", flush=True)
"""


def _sweep(tmp_path: Path) -> tuple[Path, Path]:
    sweep = tmp_path / "sweep"
    rows = [(lr, bs, s) for lr in ("0.003", "0.01") for bs in ("32", "128") for s in ("1", "2")]
    for lr, bs, s in rows:
        if (lr, bs, s) == ("0.01", "128", "2"):
            continue  # the launcher never got to this cell
        run = sweep / f"lr{lr}_bs{bs}_s{s}"
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"lr": float(lr), "batch_size": int(bs), "seed": int(s)}))
        with (run / "train.log").open("w") as out:
            subprocess.run([sys.executable, "-c", TRAIN, lr, bs, s], cwd=run, stdout=out, stderr=subprocess.STDOUT,
                           check=True, timeout=60)
    grid = tmp_path / "grid.csv"
    grid.write_text("lr,batch_size,seed\n" + "".join(f"{lr},{bs},{s}\n" for lr, bs, s in rows))
    return sweep, grid


def test_a_parameter_grid_names_each_cell_by_its_run_and_finds_the_one_never_launched(tmp_path: Path) -> None:
    sweep, grid = _sweep(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "triage-runs", str(sweep), "--expect", str(grid),
                           "--results", str(sweep / "*" / "results.json"), "--out-dir", str(tmp_path / "out"),
                           "--workers", "1"], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    e = json.loads((tmp_path / "out" / "triage-runs.json").read_text())["expect"]
    assert e["expected"] == 8
    assert e["cells_without_run"] == ["lr=0.01 batch_size=128 seed=2"]
    assert e["runs_without_result"] == [] and e["results_without_run"] == []
    assert "cells with no run: 1 (lr=0.01 batch_size=128 seed=2)" in proc.stdout


def test_values_are_matched_as_numbers_on_tokens_of_their_own(tmp_path: Path) -> None:
    grid = tmp_path / "grid.csv"
    grid.write_text("lr,seed\n1e-3,1\n0.1,1\n0.01,1\n")
    runs = ["lr0.001_s1", "lr0.01_s1", "lr0.01_s11"]
    # 1e-3 is lr0.001; 0.1 is no run ('lr0.01' is not 0.1, 's11' is not seed 1); 0.01 with seed 1 is lr0.01_s1 alone
    assert read_grid(str(grid), runs) == ["lr0.001_s1", "lr=0.1 seed=1", "lr0.01_s1"]


def test_a_single_column_of_names_is_still_names_header_or_not(tmp_path: Path) -> None:
    grid = tmp_path / "grid.csv"
    grid.write_text("run_a\nrun_b\n")
    assert read_grid(str(grid), ["run_a"]) == ["run_a", "run_b"]
    grid.write_text("name,lr\nrun_a,0.1\nrun_b,0.2\n")
    assert read_grid(str(grid), ["run_a"]) == ["run_a", "run_b"]
