"""A real PyTorch run that survives a data error, trains on, then dies of a NaN loss.

    python skip_then_nan.py OUT_DIR > OUT_DIR/train.log

The dataset reads one .npy file per sample; one file is missing. The loop logs the error with its
traceback and skips the batch, as many trainers do, and trains on; at step 60 a mistyped learning-rate
schedule jumps to 5.0, the loss overflows, and the finiteness check raises.
"""

import sys
import traceback
from pathlib import Path

import numpy as np
import torch

out = Path(sys.argv[1])
data = out / "data"
data.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)
for i in range(64):
    if i != 17:  # sample 17 was never written
        np.save(data / f"sample_{i}.npy", rng.standard_normal(17).astype(np.float32))


def load(i: int) -> torch.Tensor:
    return torch.from_numpy(np.load(data / f"sample_{i}.npy"))


torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 200):
    try:
        batch = torch.stack([load(i % 64) for i in range(step * 4, step * 4 + 4)])
    except OSError:
        print(f"step {step}: failed to load a batch, skipping it", flush=True)
        traceback.print_exc(file=sys.stdout)
        continue
    x, y = batch[:, :16], batch[:, 16:]
    for g in opt.param_groups:
        g["lr"] = 0.01 if step < 60 else 5.0
    loss = torch.nn.functional.mse_loss(model(x), y)
    if not torch.isfinite(loss):
        raise FloatingPointError(f"Loss is {loss.item()} at step {step}: stopping training")
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} | loss {loss.item():.6g} | lr {opt.param_groups[0]['lr']}", flush=True)
