"""A real grid of training runs, launched once per session the way a sweep launcher would.

Each cell is a child process of tests/grid/cell.py under bash (so a killed child is reported by
the shell, as a launcher reports it), with its own config.json and a train.log holding its
stdout and stderr. Most cells finish; several diverge to inf with a huge learning rate; some ask
for an optimizer that does not exist; two read a data shard nobody wrote; one is SIGKILLed; one
writes its result and then crashes; one writes its result somewhere else; one is in the grid
but never launched. Two cells were relaunched: one deterministic crash that recurs at the same
step, one kill that recurs only after the relaunch resumed and got further.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CELL = Path(__file__).with_name("cell.py")
PARALLEL = 4


@dataclass
class Grid:
    root: Path
    runs: Path
    results: Path
    expect_csv: Path
    families: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0


def _cells() -> list[tuple[str, str, dict[str, Any]]]:
    """(family, name, config): the grid's cells."""
    cells: list[tuple[str, str, dict[str, Any]]] = []
    for lr in (0.01, 0.02, 0.05):
        for seed in (1, 2, 3, 4):
            cells.append(("ok", f"ok-lr{lr}-s{seed}", {"optimizer": "sgd" if seed % 2 else "momentum", "lr": lr, "seed": seed}))
    for lr, seed in ((300, 1), (300, 2), (1000, 1), (1000, 3), (3000, 2)):
        cells.append(("nan", f"nan-lr{lr}-s{seed}", {"optimizer": "sgd", "lr": lr, "seed": seed}))
    for lr in (0.01, 0.02, 0.05):
        cells.append(("keyerror", f"adamw-lr{lr}", {"optimizer": "adamw", "lr": lr, "seed": 1}))
    for shard in (3, 11):
        cells.append(("nodata", f"shard{shard}", {"optimizer": "sgd", "lr": 0.02, "seed": 1, "data": f"DATA/shard-{shard:02d}.bin"}))
    cells.append(("killed", "killed-s1", {"optimizer": "sgd", "lr": 0.02, "seed": 1, "kill_at": 33}))
    cells.append(("crash-after-result", "summary-crash", {"optimizer": "sgd", "lr": 0.02, "seed": 5, "summary_tags": ["a", "b"]}))
    cells.append(("elsewhere", "ok-elsewhere", {"optimizer": "sgd", "lr": 0.02, "seed": 6, "result_path": "ELSEWHERE/ok-elsewhere.json"}))
    return cells


def _launch(run_dir: Path, cfg: dict[str, Any]) -> subprocess.Popen[bytes]:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(cfg))
    log = open(run_dir / "train.log", "wb")  # noqa: SIM115 - the child holds it; closed when the child is reaped
    # `; exit $?` keeps bash as the parent, so a SIGKILLed child is reported ("... Killed python ...") as a launcher does
    p = subprocess.Popen(["bash", "-c", f'"{sys.executable}" "{CELL}"; exit $?'], cwd=run_dir, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return p


def _run_all(jobs: list[tuple[Path, dict[str, Any]]]) -> None:
    running: list[subprocess.Popen[bytes]] = []
    for run_dir, cfg in jobs:
        while len(running) >= PARALLEL:
            running = [p for p in running if p.poll() is None]
            time.sleep(0.02)
        running.append(_launch(run_dir, cfg))
    for p in running:
        p.wait(timeout=60)


def build_grid(root: Path) -> Grid:
    t0 = time.monotonic()
    g = Grid(root=root, runs=root / "grid", results=root / "results", expect_csv=root / "grid.csv")
    jobs = []
    for family, name, cfg in _cells():
        cfg = {"name": name, "steps": 80, "result_path": str(g.results / f"{name}.json"), **cfg}
        if "data" in cfg:
            cfg["data"] = cfg["data"].replace("DATA", str(root / "data"))
        cfg["result_path"] = cfg["result_path"].replace("ELSEWHERE", str(root / "elsewhere"))
        g.families.setdefault(family, []).append(name)
        jobs.append((g.runs / name, cfg))
    # relaunched cells: the first attempts, then their relaunches
    nan = {"name": "relaunch-nan", "optimizer": "sgd", "lr": 1000, "seed": 3, "steps": 80, "result_path": str(g.results / "relaunch-nan.json")}
    kill = {"name": "relaunch-kill", "optimizer": "sgd", "lr": 0.02, "seed": 1, "steps": 80, "kill_at": 30,
            "result_path": str(g.results / "relaunch-kill.json")}
    jobs += [(g.runs / "relaunch-nan" / "attempt-1", nan), (g.runs / "relaunch-kill" / "attempt-1", kill)]
    _run_all(jobs)
    resume = {**kill, "kill_at": 70, "resume_from": str(g.runs / "relaunch-kill" / "attempt-1" / "checkpoint.json")}
    _run_all([(g.runs / "relaunch-nan" / "attempt-2", nan), (g.runs / "relaunch-kill" / "attempt-2", resume)])
    g.families["relaunch-nan"] = ["relaunch-nan"]
    g.families["relaunch-kill"] = ["relaunch-kill"]
    g.families["never"] = ["never-ran"]  # in the grid, never launched
    with open(g.expect_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["name", "lr", "seed"])
        for names in g.families.values():
            for n in names:
                w.writerow([n, "", ""])
    g.seconds = time.monotonic() - t0
    return g


@pytest.fixture(scope="session")
def real_grid(tmp_path_factory: pytest.TempPathFactory) -> Grid:
    return build_grid(tmp_path_factory.mktemp("real-grid"))
