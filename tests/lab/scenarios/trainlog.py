"""What every lab trainer prints, the way real trainers print it: a timestamped step line with
loss, grad norm, learning rate and resident memory (so a later kill can be told from an OOM)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def rss_mb() -> float:
    """Current resident set size of this process, from /proc (what `top` shows as RES)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def log_step(step: int, **metrics: float) -> None:
    parts = " | ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())
    print(f"[{stamp()}] step {step} | {parts} | rss_mb {rss_mb():.0f}", flush=True)


def write_config(args: object, path: str = "config.json") -> None:
    """Save the run's arguments next to its log, as most trainers do (args.json, hparams.yaml)."""
    cfg = dict(vars(args))
    Path(path).write_text(json.dumps(cfg, indent=2) + "\n")
    print(f"[{stamp()}] config: {json.dumps(cfg)}", flush=True)
