"""A real, slow training run for watch-run: trains a tiny model, one step every --step-seconds.

--mode healthy: trains to --steps; nan: the input of step --at is scaled by 1e30 (a corrupt
batch) and the loss goes inf/NaN; stall: stops logging after step --at and sleeps (alive, hung).
"""

import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["healthy", "nan", "stall"], default="healthy")
ap.add_argument("--steps", type=int, default=60)
ap.add_argument("--at", type=int, default=20)
ap.add_argument("--step-seconds", type=float, default=0.1)
args = ap.parse_args()
torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, args.steps + 1):
    x = torch.randn(32, 16)
    if args.mode == "nan" and step >= args.at:
        x = x * 1e30
    loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} step {step} | loss {loss.item():.4f} | lr 0.01", flush=True)
    if args.mode == "stall" and step == args.at:
        time.sleep(3600)
    time.sleep(args.step_seconds)
print("training completed", flush=True)
