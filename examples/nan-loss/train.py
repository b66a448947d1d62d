"""A real failing run: a small regression MLP trained with SGD at lr=0.15 and no warmup.

Run: python train.py > train.log 2>&1   (PyTorch on the CPU, a few seconds)
The loss falls for a few steps, the updates overshoot, the loss explodes to inf and NaN,
and the loop's own finiteness check stops the run, as detectron2 and mmdet do.
"""

import json
import sys
import time

import torch

torch.manual_seed(0)
LR = float(sys.argv[1]) if len(sys.argv) > 1 else 0.15
X = torch.randn(2048, 32)
W = torch.randn(32, 1)
Y = X @ W + 0.1 * torch.randn(2048, 1)
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
opt = torch.optim.SGD(model.parameters(), lr=LR)
print(json.dumps({"lr": LR, "batch_size": 64, "optimizer": "SGD", "warmup_steps": 0}))
print(f"torch {torch.__version__}, {sum(p.numel() for p in model.parameters())} parameters")
for step in range(1, 301):
    idx = torch.randint(0, X.shape[0], (64,))
    loss = torch.nn.functional.mse_loss(model(X[idx]), Y[idx])
    opt.zero_grad()
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    opt.step()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp}] step {step} | loss {loss.item():.4f} | grad_norm {gn.item():.4f} | lr {LR}", flush=True)
    if not torch.isfinite(loss):
        raise FloatingPointError(f"Loss became infinite or NaN at iteration={step}!")
print("training completed")
