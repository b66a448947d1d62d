"""A small regression trainer (MLP, SGD, MSE) whose numerics fail in the two common ways.

    python regress.py --lr 0.5                  # NaN within a few steps: lr too high, no warmup
    python regress.py --bad-record-step 400     # 400 stable steps, then one corrupt record (inf)

Like detectron2 and mmdet, the loop stops on the first non-finite loss.
"""

from __future__ import annotations

import argparse

import torch
from trainlog import log_step, stamp, write_config

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.01)
p.add_argument("--steps", type=int, default=500)
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--bad-record-step", type=int, default=0, help="serve a batch holding one corrupt (inf) record at this step")
args = p.parse_args()
write_config(args)

torch.manual_seed(0)
X = torch.randn(8192, 32)
W = torch.randn(32, 1)
Y = X @ W + 0.1 * torch.randn(8192, 1)
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
print(f"[{stamp()}] torch {torch.__version__}, {sum(p.numel() for p in model.parameters())} parameters, {len(X)} records")

for step in range(1, args.steps + 1):
    idx = torch.randint(0, len(X), (args.batch_size,))
    xb, yb = X[idx].clone(), Y[idx]
    if step == args.bad_record_step:
        xb[7, 3] = float("inf")  # a record whose feature overflowed when it was written
    loss = torch.nn.functional.mse_loss(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    opt.step()
    log_step(step, loss=loss.item(), grad_norm=gn.item(), lr=args.lr)
    if not torch.isfinite(loss):
        raise FloatingPointError(f"Loss became infinite or NaN at iteration={step}!")
print(f"[{stamp()}] training completed")
