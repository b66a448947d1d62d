#!/usr/bin/env python
"""Train the sequence-regression MLP; checkpoints every --save-every steps to ckpt/step_<N>/.

--resume auto picks the newest checkpoint in ckpt/ and continues from its step.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import math
import os
import time

import torch
from safetensors.torch import load_file, save_file
from torch import nn

log = logging.getLogger("train")


def batch(gen: torch.Generator, bs: int):
    t = torch.rand(bs, 1, generator=gen) * 6.28
    x = torch.cat([torch.sin(t * k) for k in range(1, 17)], 1) + 0.05 * torch.randn(bs, 16, generator=gen)
    y = torch.sin(3 * t) * torch.cos(t) + 0.5 * torch.sin(5 * t)
    return x, y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--save-every", type=int, default=250)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--resume", default="")
    ap.add_argument("--ckpt-dir", default="ckpt")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    log.info("start pid %d args %s", os.getpid(), vars(args))

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 256), nn.SiLU(), nn.Linear(256, 256), nn.SiLU(), nn.Linear(256, 1))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / args.steps)))
    start = 0
    if args.resume:
        path = args.resume
        if path == "auto":
            found = sorted(glob.glob(os.path.join(args.ckpt_dir, "step_*")))
            path = found[-1] if found else ""
        if path:
            model.load_state_dict(load_file(os.path.join(path, "model.safetensors")))
            opt.load_state_dict(torch.load(os.path.join(path, "optimizer.pt")))
            with open(os.path.join(path, "trainer_state.json")) as f:
                st = json.load(f)
            start = st["step"]
            for _ in range(start):
                sched.step()
            log.info("resumed from %s (step %d, loss %.5f)", path, start, st["loss"])
        else:
            log.info("no checkpoint in %s, starting from scratch", args.ckpt_dir)
    gen = torch.Generator().manual_seed(1000 + start)
    t0 = time.time()
    for step in range(start + 1, args.steps + 1):
        x, y = batch(gen, args.batch_size)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % args.log_every == 0:
            log.info("step %d/%d loss %.5f lr %.2e", step, args.steps, loss.item(), sched.get_last_lr()[0])
        if step % args.save_every == 0:
            d = os.path.join(args.ckpt_dir, f"step_{step}")
            os.makedirs(d, exist_ok=True)
            save_file(model.state_dict(), os.path.join(d, "model.safetensors"))
            torch.save(opt.state_dict(), os.path.join(d, "optimizer.pt"))
            with open(os.path.join(d, "trainer_state.json"), "w") as f:
                json.dump({"step": step, "loss": loss.item(), "lr": sched.get_last_lr()[0]}, f)
            log.info("saved checkpoint %s", d)
    log.info("training complete: %d steps in %.1fs (this launch), final loss %.5f", args.steps, time.time() - t0,
             loss.item())


if __name__ == "__main__":
    main()
