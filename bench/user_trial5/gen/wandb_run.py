"""TinyLM with a linear warmup to a peak lr of 8e-2 (meant 8e-4), tracked by W&B in offline mode
(the run directory holds the offline run). The console holds a progress bar and a few lines.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
import wandb
from common import SEQ, Bar, TinyLM, dump_config, lm_loss, markov_tokens, setup_logging


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--steps", type=int, default=30000)
    ap.add_argument("--peak-lr", type=float, default=8e-2)
    ap.add_argument("--warmup", type=int, default=12000)
    ap.add_argument("--batch", type=int, default=16)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    log = setup_logging(None)
    run_dir = Path(a.run_dir).resolve()
    data = torch.from_numpy(markov_tokens(np.random.default_rng(9), 60000))
    val = torch.from_numpy(markov_tokens(np.random.default_rng(9), 62048)[-2048:])
    cfg = {"model": {"name": "tinylm", "d_model": 48, "seq_len": SEQ},
           "optim": {"name": "adamw", "peak_lr": a.peak_lr, "warmup_steps": a.warmup, "decay": "linear"},
           "data": {"train_size": len(data), "batch_size": a.batch}, "train": {"max_steps": a.steps}}
    dump_config(log, cfg)
    run = wandb.init(project="tinylm", name="tinylm-d48-warmup", dir=str(run_dir), config=cfg, mode="offline")
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=a.peak_lr, weight_decay=0.01)

    def lr_at(s: int) -> float:
        if s < a.warmup:
            return a.peak_lr * (s + 1) / a.warmup
        return a.peak_lr * max(0.0, (a.steps - s) / (a.steps - a.warmup))

    bar = Bar(a.steps, "train", every=10)
    step = 0
    while step < a.steps:
        perm = torch.randperm(len(data))
        for i in range(0, len(data) - a.batch + 1, a.batch):
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            loss = lm_loss(model, data[perm[i:i + a.batch]])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            step += 1
            metrics = {"train/loss": loss.item(), "train/lr": lr_at(step - 1), "train/grad_norm": float(gn)}
            if step % 1000 == 0:
                with torch.no_grad():
                    metrics["eval/loss"] = float(lm_loss(model, val))
            run.log(metrics, step=step)
            bar.set_postfix(lr=f"{lr_at(step - 1):.2e}")
            bar.update(1)
            if step % 5000 == 0:
                torch.save(model.state_dict(), run_dir / f"ckpt-{step}.pt")
                log.info("step %d: saved %s", step, run_dir / f"ckpt-{step}.pt")
            if step >= a.steps:
                break
    run.finish()
    log.info("done: %d steps; run stored offline under %s (wandb sync to upload)", step, run_dir / "wandb")


if __name__ == "__main__":
    main()
