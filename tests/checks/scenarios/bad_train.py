"""A training script that saves only at the end and cannot resume: a killed run loses everything.
With --break it fails on its first step with a shape mismatch."""

import argparse

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--break", dest="broken", action="store_true")
args = ap.parse_args()
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, args.steps + 1):
    x = torch.randn(8, 12 if args.broken else 16)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
torch.save(model.state_dict(), "final.pt")
