"""One cell of a hyperparameter grid: a tiny linear regression trained by plain-Python gradient descent.

The grid tests launch it as a real child process, as a sweep launcher would, with the cell's
config.json in its working directory; whatever happens to it (a finished run, a NaN from a huge
learning rate, a config key that does not exist, a missing data shard, a SIGKILL, a crash after the
result was written) really happens, and its log is what a person would find afterwards.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sys
import time
from datetime import datetime
from pathlib import Path


def log(msg: str) -> None:
    print(f"[{datetime.now():%Y-%m-%d %H:%M:%S}] {msg}", flush=True)


def sgd(w: list[float], g: list[float], lr: float, state: dict) -> None:
    for i in range(len(w)):
        w[i] -= lr * g[i]


def momentum(w: list[float], g: list[float], lr: float, state: dict) -> None:
    v = state.setdefault("v", [0.0] * len(w))
    for i in range(len(w)):
        v[i] = 0.9 * v[i] + g[i]
        w[i] -= lr * v[i]


OPTIMIZERS = {"sgd": sgd, "momentum": momentum}


def main() -> int:
    cfg = json.loads(Path("config.json").read_text())
    log(f"config: {json.dumps(cfg, sort_keys=True)}")
    step_fn = OPTIMIZERS[cfg["optimizer"]]  # a grid cell with an optimizer nobody wrote fails here
    rng = random.Random(cfg.get("seed", 0))
    if cfg.get("data"):
        with open(cfg["data"], "rb") as f:  # a shard the producer never wrote fails here
            rng.seed(len(f.read()))
    xs = [rng.uniform(-1, 1) for _ in range(64)]
    ys = [3.0 * x + 1.0 + rng.gauss(0, 0.05) for x in xs]
    w, state, start = [0.0, 0.0], {}, 1
    resume = Path(cfg.get("resume_from", "")) if cfg.get("resume_from") else None
    if resume and resume.exists():
        saved = json.loads(resume.read_text())
        w, start = saved["w"], saved["step"] + 1
        log(f"resumed from {resume} at step {saved['step']}")
    steps, lr = cfg["steps"], cfg["lr"]
    for step in range(start, steps + 1):
        errs = [w[0] * x + w[1] - y for x, y in zip(xs, ys)]
        loss = sum(e * e for e in errs) / len(errs)
        grad = [2 * sum(e * x for e, x in zip(errs, xs)) / len(errs), 2 * sum(errs) / len(errs)]
        if step % 5 == 0 or not math.isfinite(loss):
            log(f"step {step} | loss {loss:.6f} | lr {lr}")
        if not math.isfinite(loss):
            raise FloatingPointError(f"loss is {loss} at step {step}: training diverged")
        step_fn(w, grad, lr, state)
        if step % 10 == 0:
            Path("checkpoint.json").write_text(json.dumps({"step": step, "w": w}))
            log(f"saved checkpoint.json at step {step}")
        if cfg.get("kill_at") == step:
            os.kill(os.getpid(), signal.SIGKILL)  # what a preemption or a scheduler does to the process
        time.sleep(cfg.get("sleep", 0.004))
    result = {"cell": cfg["name"], "w": w, "final_loss": loss}
    out = Path(cfg["result_path"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result))
    log(f"wrote {out}")
    if cfg.get("summary_tags"):
        Path("summary.json").write_text(json.dumps({"result": result, "tags": set(cfg["summary_tags"])}))
    log("training complete")
    return 0


if __name__ == "__main__":
    sys.exit(main())
