#!/usr/bin/env python
"""One cell of the tabular-regression sweep: an MLP regressor trained with SGD + momentum.

usage: python train.py --config RUN_DIR/config.json
Writes RUN_DIR/results.json when training finishes.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

log = logging.getLogger("train")


def make_data(n_train: int, n_val: int, data_seed: int):
    g = np.random.default_rng(data_seed)
    mix = np.eye(16) + g.normal(size=(16, 16)) / 4
    w = g.normal(size=16)
    x = g.normal(size=(n_train + n_val, 16)) @ mix
    y = np.tanh(x @ w / 4) * 3 + 0.5 * np.sin(x[:, 0]) + 0.1 * g.normal(size=len(x))
    x = torch.tensor(x, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.float32)[:, None]
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def build_model(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, width), nn.Tanh(),
        nn.Linear(width, width), nn.Tanh(),
        nn.Linear(width, 1),
    )


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    mse = nn.functional.mse_loss(model(x), y).item()
    model.train()
    return mse


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    args = ap.parse_args()
    run_dir = os.path.dirname(os.path.abspath(args.config))
    with open(args.config) as f:
        cfg = json.load(f)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(int(cfg.get("threads", 1)))
    log.info("run %s (pid %d, torch %s)", cfg["run_name"], os.getpid(), torch.__version__)
    log.info("config: %s", json.dumps(cfg, sort_keys=True))

    torch.manual_seed(cfg["seed"])
    np.random.seed(cfg["seed"])

    # linear scaling rule: the lr in the grid is the lr at the reference batch size
    lr = cfg["lr"] * cfg["batch_size"] / cfg["ref_batch_size"]
    if lr > cfg["max_lr"]:
        raise ValueError(
            f"effective learning rate {lr:g} (lr {cfg['lr']:g} x batch_size {cfg['batch_size']} / "
            f"ref_batch_size {cfg['ref_batch_size']}) exceeds max_lr {cfg['max_lr']:g}"
        )
    log.info("effective lr %.4g (linear scaling from ref batch size %d)", lr, cfg["ref_batch_size"])

    (xt, yt), (xv, yv) = make_data(cfg["n_train"], cfg["n_val"], cfg["data_seed"])
    gen = torch.Generator().manual_seed(cfg["seed"])
    loader = DataLoader(TensorDataset(xt, yt), batch_size=cfg["batch_size"], shuffle=True, generator=gen)
    model = build_model(cfg["width"])
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=cfg["momentum"])
    n_params = sum(p.numel() for p in model.parameters())
    steps_per_epoch = len(loader)
    total = steps_per_epoch * cfg["epochs"]
    log.info("model: %d parameters; %d train / %d val samples; %d steps per epoch, %d steps",
             n_params, len(xt), len(xv), steps_per_epoch, total)

    t0 = time.time()
    step = 0
    best = math.inf
    history = []
    for epoch in range(1, cfg["epochs"] + 1):
        run_loss, n = 0.0, 0
        for xb, yb in loader:
            step += 1
            loss = nn.functional.mse_loss(model(xb), yb)
            if not torch.isfinite(loss):
                log.error("non-finite loss %s at epoch %d step %d/%d", loss.item(), epoch, step, total)
                raise FloatingPointError(f"loss became {loss.item()} at step {step}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")).item()
            opt.step()
            run_loss += loss.item()
            n += 1
            if step % cfg["log_every"] == 0:
                log.info("epoch %d/%d step %d/%d loss %.5f grad_norm %.4g lr %.4g",
                         epoch, cfg["epochs"], step, total, run_loss / n, gnorm, lr)
        val = evaluate(model, xv, yv)
        best = min(best, val)
        history.append({"epoch": epoch, "train_loss": run_loss / max(n, 1), "val_mse": val})
        log.info("epoch %d/%d done: train_loss %.5f val_mse %.5f (best %.5f) %.1fs",
                 epoch, cfg["epochs"], run_loss / max(n, 1), val, best, time.time() - t0)

    res = {"run_name": cfg["run_name"], "lr": cfg["lr"], "batch_size": cfg["batch_size"], "seed": cfg["seed"],
           "effective_lr": lr, "val_mse": history[-1]["val_mse"], "best_val_mse": best, "steps": step,
           "epochs": cfg["epochs"], "wall_time_s": round(time.time() - t0, 2), "history": history}
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        json.dump(res, f, indent=2)
    log.info("finished: val_mse %.5f best %.5f in %.1fs; wrote results.json", res["val_mse"], best, res["wall_time_s"])


if __name__ == "__main__":
    main()
