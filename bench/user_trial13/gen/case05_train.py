#!/usr/bin/env python
"""Image-classifier stand-in (MLP on 16x16 synthetic 'digits'), logged to TensorBoard.

Batch-size ramp: after --ramp-epoch the batch size doubles and the loaders are rebuilt.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.tensorboard import SummaryWriter


def make_split(n: int, seed: int):
    g = np.random.default_rng(seed)
    protos = np.random.default_rng(2024).normal(size=(10, 256)).astype(np.float32)
    y = g.integers(0, 10, size=n)
    x = protos[y] * 0.16 + g.normal(size=(n, 256)).astype(np.float32)
    return TensorDataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y))


def make_loader(ds: TensorDataset, batch_size: int, shuffle: bool = True) -> DataLoader:
    return DataLoader(ds, batch_size=batch_size, shuffle=shuffle)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logdir", required=True)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--ramp-epoch", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(2)
    train, val = make_split(10000, 1), make_split(3000, 2)
    val_targets = val.tensors[1]
    bs = args.batch_size
    train_loader = make_loader(train, bs)
    val_loader = make_loader(val, 512, shuffle=False)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs)
    writer = SummaryWriter(args.logdir)
    writer.add_text("config", str(vars(args)))
    step = 0
    for epoch in range(args.epochs):
        if epoch == args.ramp_epoch:
            bs *= 2
            train_loader, val_loader = (make_loader(d, bs) for d in (train, val))
        model.train()
        correct = seen = 0
        for xb, yb in train_loader:
            out = model(xb)
            loss = nn.functional.cross_entropy(out, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            correct += (out.argmax(1) == yb).sum().item()
            seen += len(yb)
            if step % 20 == 0:
                writer.add_scalar("Loss/train", loss.item(), step)
                writer.add_scalar("lr", opt.param_groups[0]["lr"], step)
        writer.add_scalar("Accuracy/train", correct / seen, step)
        writer.add_scalar("batch_size", bs, step)
        sched.step()
        model.eval()
        preds, vloss = [], 0.0
        with torch.no_grad():
            for xb, yb in val_loader:
                out = model(xb)
                vloss += nn.functional.cross_entropy(out, yb, reduction="sum").item()
                preds.append(out.argmax(1))
        acc = (torch.cat(preds) == val_targets).float().mean().item()
        writer.add_scalar("Loss/val", vloss / len(val), step)
        writer.add_scalar("Accuracy/val", acc, step)
    writer.close()


if __name__ == "__main__":
    main()
