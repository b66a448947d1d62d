"""A real PyTorch run that goes NaN and keeps running, saving a checkpoint every SAVE_EVERY steps.

    python nan_saves.py OUT_DIR > OUT_DIR/train.log

A linear regression whose learning-rate schedule jumps from 0.01 to 5.0 at step 30 (a mistyped
schedule): the weights grow without bound, the loss overflows to inf and then NaN, and the loop goes on
(no finiteness check), saving every SAVE_EVERY steps, as many trainers do. It runs until killed.
"""

import sys
import time
from pathlib import Path

import torch

SAVE_EVERY = 10
out = Path(sys.argv[1])
(out / "ckpt").mkdir(parents=True, exist_ok=True)
torch.manual_seed(0)
print(f"torch {torch.__version__} | save_every={SAVE_EVERY} | precision=fp32", flush=True)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 16)
y = x.sum(1, keepdim=True)
step = 0
while True:
    step += 1
    lr = 0.01 if step < 30 else 5.0
    for g in opt.param_groups:
        g["lr"] = lr
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} | loss {loss.item():.6g} | lr {lr}", flush=True)
    if step % SAVE_EVERY == 0:
        path = out / "ckpt" / f"step_{step}.pt"
        torch.save(model.state_dict(), path)
        print(f"Saving checkpoint to {path}", flush=True)
    time.sleep(0.02)
