"""A small training script with the habits preflight-run looks for: periodic checkpoints, a
resume path, and a save on failure or SIGTERM. Logs timestamped step lines."""

import argparse
import signal
import sys
import time
from pathlib import Path

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--batch-size", type=int, default=32)
ap.add_argument("--save-every", type=int, default=10)
ap.add_argument("--out", default="out")
ap.add_argument("--resume", default=None)
ap.add_argument("--step-seconds", type=float, default=0.0)
args = ap.parse_args()
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
start = 0
if args.resume:
    state = torch.load(args.resume, weights_only=True)
    model.load_state_dict(state["model"])
    start = state["step"]


def save(step):
    torch.save({"model": model.state_dict(), "step": step}, out / f"checkpoint-{step}.pt")


def on_term(signum, frame):
    save(step)
    sys.exit(143)


signal.signal(signal.SIGTERM, on_term)
step = start
try:
    for step in range(start + 1, args.steps + 1):
        x = torch.randn(args.batch_size, 16)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} step {step} | loss {loss.item():.4f}", flush=True)
        if step % args.save_every == 0:
            save(step)
        time.sleep(args.step_seconds)
except Exception:
    save(step)
    raise
print("training completed")
