#!/usr/bin/env python
"""Demand forecasting: an MLP predicts log(units sold) from store/item features. Logged to W&B."""

from __future__ import annotations

import argparse

import numpy as np
import torch
import wandb
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(n: int, seed: int, dim: int = 20):
    g = np.random.default_rng(seed)
    w = np.random.default_rng(5).normal(size=dim) / np.sqrt(dim)
    x = g.normal(size=(n, dim)).astype(np.float32)
    rate = np.exp(3.0 + 0.8 * np.tanh(x @ w * 2) + 0.3 * x[:, 1])
    units = g.poisson(rate).astype(np.float32)  # a handful of rows really sell nothing
    return torch.tensor(x), torch.tensor(units)[:, None]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--data-seed", type=int, default=11)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    xt, ut = make_data(24000, args.data_seed)
    xv, uv = make_data(3000, args.data_seed + 1)
    uv = uv.clamp(min=1)  # the validation export already drops zero-sale rows
    loader = DataLoader(TensorDataset(xt, ut), batch_size=args.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(args.seed))
    model = nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=len(loader) * args.epochs)

    run = wandb.init(project="demand-forecast", name="mlp-logunits", dir=args.dir, config={
        **vars(args), "target": "log(units)", "model": "mlp-20-128-128-1", "optimizer": "adamw",
        "schedule": "onecycle", "n_train": len(xt), "n_val": len(xv)})
    step = 0
    for epoch in range(args.epochs):
        model.train()
        for xb, ub in loader:
            target = torch.log(ub)
            pred = model(xb)
            loss = nn.functional.mse_loss(pred, target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")).item()
            opt.step()
            sched.step()
            step += 1
            run.log({"train/loss": loss.item(), "train/grad_norm": gnorm, "train/lr": sched.get_last_lr()[0],
                     "epoch": step / len(loader)}, step=step)
        model.eval()
        with torch.no_grad():
            pv = model(xv)
            vloss = nn.functional.mse_loss(pv, torch.log(uv)).item()
            mae = (pv.exp() - uv).abs().mean().item()
        run.log({"val/loss": vloss, "val/mae_units": mae, "epoch": epoch + 1}, step=step)
    run.finish()


if __name__ == "__main__":
    main()
