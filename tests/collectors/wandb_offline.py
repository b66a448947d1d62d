"""Write real W&B offline runs: `python -m tests.collectors.wandb_offline KIND...` with WANDB_DIR set.

Each KIND (healthy, diverging, nan) is one real training (training.py) logged by the real
wandb library, one wandb.log call per metric; `killed` dies mid-run (os._exit) without
finishing the run, as a job killed by the scheduler does.
"""

from __future__ import annotations

import os
import sys
import time

import wandb

from .training import train


def main(kinds: list[str]) -> None:
    for kind in kinds:
        run = wandb.init(
            project="ml-skills-tests",
            name=kind,
            id=f"{kind}run",
            mode="offline",
            config={"optimizer": "sgd", "batch_size": 16, "kind": kind},
        )

        def log(step: int, d: dict[str, float], kind: str = kind) -> None:
            if kind == "killed" and step == 40:
                sys.stdout.flush()
                time.sleep(3)  # a killed job has usually had its history flushed for a while
                os._exit(137)
            wandb.log(d, step=step)

        ended = train("healthy" if kind == "killed" else kind, log, sys.stdout)
        run.finish(exit_code=0 if ended == "finished" else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
