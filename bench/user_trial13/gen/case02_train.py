#!/usr/bin/env python
"""Train a small MLP regressor on a synthetic tabular task, tracked in MLflow.

Schedule: linear warmup to the peak lr, then exponential decay to final_lr over the remaining steps.
"""

from __future__ import annotations

import argparse

import mlflow
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(n: int, seed: int, dim: int = 32):
    g = np.random.default_rng(seed)
    w = np.random.default_rng(99).normal(size=(dim, 4))
    x = g.normal(size=(n, dim))
    h = np.tanh(x @ w / np.sqrt(dim) * 2)
    y = h @ np.array([1.5, -1.0, 0.8, 0.5]) + 0.3 * np.sin(3 * x[:, 0]) + 0.2 * g.normal(size=n)
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)[:, None]


def lr_at(step: int, peak: float, warmup: int, final: float, total: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    # exponential decay from peak to final over the steps after warmup
    gamma = (peak / final) ** (1.0 / (total - warmup))
    return peak * gamma ** (step - warmup)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracking-uri", required=True)
    ap.add_argument("--experiment", default="tabular-reg")
    ap.add_argument("--run-name", default="mlp-expdecay")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--final-lr", type=float, default=5e-4)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--handle", default="")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    xt, yt = make_data(12000, 1)
    xv, yv = make_data(2000, 2)
    loader = DataLoader(TensorDataset(xt, yt), batch_size=args.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(args.seed))
    model = nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True)
    total = len(loader) * args.epochs

    mlflow.set_tracking_uri(args.tracking_uri)
    mlflow.set_experiment(args.experiment)
    with mlflow.start_run(run_name=args.run_name) as run:
        if args.handle:
            with open(args.handle, "w") as f:
                f.write(f"{args.tracking_uri}\n{run.info.run_id}\n")
        mlflow.log_params({"lr": args.lr, "final_lr": args.final_lr, "warmup_steps": args.warmup,
                           "schedule": "linear-warmup+exp-decay", "optimizer": "sgd-nesterov-0.9", "grad_clip": args.clip, "epochs": args.epochs,
                           "batch_size": args.batch_size, "seed": args.seed, "total_steps": total,
                           "model": "mlp-tanh-32-128-128-1", "loss": "mse"})
        step = 0
        for epoch in range(args.epochs):
            model.train()
            for xb, yb in loader:
                lr = lr_at(step, args.lr, args.warmup, args.final_lr, total)
                for group in opt.param_groups:
                    group["lr"] = lr
                loss = nn.functional.mse_loss(model(xb), yb)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip).item()
                opt.step()
                mlflow.log_metrics({"train_loss": loss.item(), "lr": lr, "grad_norm": gnorm}, step=step)
                step += 1
            model.eval()
            with torch.no_grad():
                pred = model(xv)
                vloss = nn.functional.mse_loss(pred, yv).item()
                vr2 = 1.0 - vloss / yv.var().item()
            mlflow.log_metrics({"val_loss": vloss, "val_r2": vr2, "epoch": epoch + 1}, step=step)
            print(f"epoch {epoch + 1} val_loss {vloss:.4f} val_r2 {vr2:.4f} lr {lr:.3g}", flush=True)


if __name__ == "__main__":
    main()
