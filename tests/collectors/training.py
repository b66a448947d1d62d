"""Tiny real PyTorch trainings (CPU, a second or so) whose metrics the tracker tests log.

Each returns nothing; it calls `log(step, {name: value})` once per metric, in separate calls,
as trainers do (loss every step, lr from the scheduler, eval every few steps), and prints
its progress to `out` like a training script's stdout.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TextIO

import torch

Log = Callable[[int, dict[str, float]], None]


def train(kind: str, log: Log, out: TextIO, steps: int = 80) -> str:
    """Run one training of `kind` (healthy, diverging, nan, precursor); return how it ended (finished/failed).

    `precursor` is a count model (Poisson loss, whose exp overflows) fed one batch in other units at step 60:
    its gradient norm jumps a thousandfold on that step and the next step's loss is inf, a NaN gradient with it.
    """
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    w_true = 0.5 * torch.randn(8, 1)
    y = x @ w_true + 0.5 * torch.randn(512, 1)
    xv, yv = torch.randn(128, 8), None
    yv = xv @ w_true + 0.5 * torch.randn(128, 1)
    if kind == "nan":
        x[400:416] = float("nan")  # a corrupt shard: one batch of NaN features mid-run
    poisson = kind == "precursor"
    if poisson:
        w_true = 0.6 * w_true
        y, yv = torch.poisson(torch.exp(x @ w_true)), torch.poisson(torch.exp(xv @ w_true))
    objective = torch.nn.functional.poisson_nll_loss if poisson else torch.nn.functional.mse_loss
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    peak = {"healthy": 0.05, "diverging": 1.6, "nan": 0.05, "precursor": 0.02}[kind]
    for step in range(steps):
        lr = 0.02 + (peak - 0.02) * min(1.0, step / (steps * 0.75))
        for g in opt.param_groups:
            g["lr"] = lr
        i = (step * 16) % 512
        xb, yb = x[i : i + 16], y[i : i + 16]
        if poisson and step == 60:
            xb = xb * 8  # one batch in other units (a shard that was not normalised)
        t0 = time.perf_counter()
        loss = objective(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")))
        opt.step()
        rate = 16 / max(time.perf_counter() - t0, 1e-6)
        lv = float(loss.detach())
        log(step, {"train_loss": lv})
        log(step, {"grad_norm": gn})
        log(step, {"learning_rate": lr})
        log(step, {"samples_per_second": rate})
        print(f"step {step} loss {lv:.6g} grad_norm {gn:.4g} lr {lr:.4g}", file=out)
        if step % 10 == 9:
            with torch.no_grad():
                vl = float(objective(model(xv), yv))
            log(step, {"eval_loss": vl})
            print(f"step {step} eval_loss {vl:.6g}", file=out)
        if not math.isfinite(lv):
            print(f"RuntimeError: loss is {lv} at step {step}, stopping", file=out)
            return "failed"
        if lv > 1e6:
            print(f"loss exploded to {lv:.3g} at step {step}, stopping", file=out)
            return "failed"
    print("Training completed", file=out)
    return "finished"
