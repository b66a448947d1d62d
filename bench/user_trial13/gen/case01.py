"""case01: a sweep folder. 24 planned cells (lr x batch_size x seed) of one real training script,
launched 2 at a time by a small launcher with a node-memory watchdog. 2 cells never launched.

Failures that really happen:
- lr 0.08 x batch_size 512: the linear-scaling guard in train.py raises ValueError (2 runs)
- lr 0.03 x batch_size 512 x seed 2: loss goes NaN, the script raises FloatingPointError
- one ordinary cell is SIGKILLed mid-epoch by the launcher's memory watchdog while another
  tenant's process (the 'hog' below) eats node memory
"""

from __future__ import annotations

import csv
import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from common import PY, fresh, install_script, log, mem_available_mb, rss_mb, wait_for_text

LRS = [0.003, 0.01, 0.03, 0.08]
BSS = [32, 128, 512]
SEEDS = [1, 2]
NEVER_LAUNCHED = {(0.01, 128, 2), (0.003, 512, 1)}  # submission failed: no folder
HOG_AFTER = ("lr0.01_bs32_s1", "epoch 2/10 step")  # the other tenant starts while this cell trains
BASE = {"ref_batch_size": 128, "max_lr": 0.25, "n_train": 8192, "n_val": 1024, "data_seed": 1234,
        "width": 64, "momentum": 0.9, "epochs": 10, "log_every": 16, "threads": 1}
PARALLEL = 2


def run_name(lr: float, bs: int, seed: int) -> str:
    return f"lr{lr:g}_bs{bs}_s{seed}"


class Watchdog(threading.Thread):
    """Kills the largest running job when the node's available memory falls below a floor."""

    def __init__(self, floor_mb: float) -> None:
        super().__init__(daemon=True)
        self.floor = floor_mb
        self.armed = True
        self.min_avail = float('inf')
        self.jobs: dict[str, tuple[subprocess.Popen, Path]] = {}
        self.lock = threading.Lock()
        self.stop = False
        self.killed: list[str] = []

    def run(self) -> None:
        while not self.stop:
            avail = mem_available_mb()
            self.min_avail = min(self.min_avail, avail)
            if not self.armed and avail > self.floor + 512:
                self.armed = True  # re-arm once the node has recovered
            if self.armed and avail < self.floor:
                with self.lock:
                    live = [(rss_mb(p.pid), name, p, logf) for name, (p, logf) in self.jobs.items() if p.poll() is None]
                if live:
                    rss, name, p, logf = max(live, key=lambda t: t[0])
                    p.kill()
                    p.wait()
                    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                    with open(logf, "a") as f:
                        f.write(f"[{stamp}] sweep-watchdog: node memory low (MemAvailable {avail:.0f} MiB < floor "
                                f"{self.floor:.0f} MiB): killed the largest job {name} (pid {p.pid}, rss {rss:.0f} MiB) "
                                f"with SIGKILL\n")
                    self.killed.append(name)
                    self.armed = False
                    log(f"watchdog killed {name}")
            time.sleep(0.1)


def hog(sweep: Path) -> None:
    """Another tenant's job on the node: holds ~4 GiB for a few seconds."""
    target = sweep / HOG_AFTER[0] / "train.log"
    if wait_for_text(target, HOG_AFTER[1], timeout=600):
        log("hog starts")
        subprocess.run([PY, "-c", "import time; b = bytearray(b'\\x01') * (4096 << 20); time.sleep(3)"])  # noqa: PLW1510 - the generator as it ran
        log("hog done")


def main() -> None:
    case = fresh("case01")
    sweep = case / "sweep"
    sweep.mkdir()
    script = install_script("case01_train.py", case)
    cells = list(itertools.product(LRS, BSS, SEEDS))
    with open(case / "grid.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["lr", "batch_size", "seed"])
        for c in cells:
            w.writerow([f"{c[0]:g}", c[1], c[2]])
    samples = []
    for _ in range(10):
        samples.append(mem_available_mb())
        time.sleep(0.1)
    floor = sorted(samples)[5] - 2560
    log(f"floor {floor:.0f} MiB")
    dog = Watchdog(floor)
    dog.start()
    threading.Thread(target=hog, args=(sweep,), daemon=True).start()
    running: list[subprocess.Popen] = []
    rcs = {}
    for lr, bs, seed in cells:
        if (lr, bs, seed) in NEVER_LAUNCHED:
            log(f"skip {run_name(lr, bs, seed)} (never launched)")
            continue
        while len([p for p in running if p.poll() is None]) >= PARALLEL:
            time.sleep(0.05)
        name = run_name(lr, bs, seed)
        rd = sweep / name
        rd.mkdir()
        cfg = {"run_name": name, "lr": lr, "batch_size": bs, "seed": seed, **BASE}
        (rd / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        logf = rd / "train.log"
        out = open(logf, "w")  # noqa: SIM115 - the generator as it ran
        p = subprocess.Popen([PY, str(script), "--config", str(rd / "config.json")], stdout=out,
                             stderr=subprocess.STDOUT, cwd=case)
        out.close()
        with dog.lock:
            dog.jobs[name] = (p, logf)
        running.append(p)
        log(f"launched {name} pid {p.pid}")
    for p in running:
        p.wait()
    dog.stop = True
    for name, (p, _) in dog.jobs.items():
        rcs[name] = p.returncode
    (Path("/tmp/t13work") / "case01_rcs.json").write_text(json.dumps({"rcs": rcs, "killed": dog.killed}, indent=1))
    for name, rc in rcs.items():
        if rc != 0:
            log(f"FAILED {name} rc={rc}")
    log(f"min MemAvailable seen {dog.min_avail:.0f} MiB")
    if len(dog.killed) != 1 or (sweep / dog.killed[0] / "results.json").exists():
        log(f"WARNING: watchdog killed {dog.killed} (must be exactly one run, killed before it finished)")
        sys.exit(1)


if __name__ == "__main__":
    main()
