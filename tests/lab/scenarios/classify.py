"""A small classification trainer (MLP, Adam, cross-entropy) with the options real trainers have:
a warmup + cosine lr schedule, precision flags, periodic checkpoints and resume.

    python classify.py --lr 0.003 --warmup-steps 50                       # trains fine
    python classify.py --lr 3.0 --warmup-steps 0                          # diverges, loss stays high
    python classify.py --fp16 --bf16                                      # incompatible options
    python classify.py --label-base 1                                     # labels 1..10 for a 10-way head
    python classify.py --out ckpt --save-every 100 --resume ckpt/step_200.pt
    NATIVE_CRASH_STEP=150 python classify.py                              # a native extension segfaults at step 150
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import torch
from trainlog import log_step, stamp, write_config

p = argparse.ArgumentParser(prog="classify.py")
p.add_argument("--lr", type=float, default=0.003)
p.add_argument("--warmup-steps", type=int, default=50)
p.add_argument("--steps", type=int, default=300)
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--num-classes", type=int, default=10)
p.add_argument("--label-base", type=int, default=0, help="first label id in the data files (0 or 1)")
p.add_argument("--fp16", action="store_true")
p.add_argument("--bf16", action="store_true")
p.add_argument("--out", default="", help="checkpoint directory")
p.add_argument("--save-every", type=int, default=0, help="save every N steps (0: only at the end)")
p.add_argument("--resume", default="", help="checkpoint to resume from")
args = p.parse_args()
if args.fp16 and args.bf16:
    raise ValueError("At most one of fp16 and bf16 can be True, but not both")
write_config(args)
if args.out:
    os.makedirs(args.out, exist_ok=True)

torch.manual_seed(0)
centers = torch.randn(args.num_classes, 64) * 0.25  # overlapping classes: loss settles near 1, not 0
labels = torch.randint(0, args.num_classes, (8192,))
X = centers[labels] + torch.randn(8192, 64)
Y = labels + args.label_base  # the files number classes from label_base
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, args.num_classes))
opt = torch.optim.Adam(model.parameters(), lr=args.lr)


def lr_at(step: int) -> float:
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    progress = (step - args.warmup_steps) / max(1, args.steps - args.warmup_steps)
    return args.lr * 0.5 * (1 + math.cos(math.pi * progress))


def save(step: int) -> None:
    os.makedirs(args.out, exist_ok=True)
    path = Path(args.out) / f"step_{step}.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, path)
    print(f"[{stamp()}] saved checkpoint {path}", flush=True)


start = 0
if args.resume:
    print(f"[{stamp()}] resuming from {args.resume}", flush=True)
    state = torch.load(args.resume, map_location="cpu")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    start = state["step"]
print(f"[{stamp()}] torch {torch.__version__}, {sum(p.numel() for p in model.parameters())} parameters, {len(X)} samples, {args.num_classes} classes")

for step in range(start + 1, args.steps + 1):
    for g in opt.param_groups:
        g["lr"] = lr_at(step)
    idx = torch.randint(0, len(X), (args.batch_size,))
    logits = model(X[idx])
    loss = torch.nn.functional.cross_entropy(logits, Y[idx])
    opt.zero_grad()
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    opt.step()
    acc = (logits.argmax(1) == Y[idx]).float().mean().item()
    log_step(step, loss=loss.item(), acc=acc, grad_norm=gn.item(), lr=lr_at(step))
    if step == int(os.environ.get("NATIVE_CRASH_STEP", "0")):
        import ctypes

        ctypes.string_at(0)  # what a buggy C extension does: read through a null pointer
    if args.out and args.save_every and step % args.save_every == 0:
        save(step)
if args.out and not (args.save_every and args.steps % args.save_every == 0):
    save(args.steps)
print(f"[{stamp()}] training completed")
