#!/usr/bin/env python
"""Train a click model (frozen pretrained item table + MLP); checkpoint every --save-every steps to ckpt/step_NNNNNN/.

Each checkpoint: state.json (step, optimizer, lr, loss), model.safetensors (weights, streamed
tensor by tensor so we never build a second serialized copy), and ckpt/latest naming the newest.
Snapshots are handed to the uploader queue for the bucket copy.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import struct
import time
from pathlib import Path

import torch
from torch import nn

log = logging.getLogger("train")
DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Uploader:
    """Copies checkpoints to CKPT_UPLOAD_URL in the background (when it is set)."""

    def __init__(self) -> None:
        self.url = os.environ.get("CKPT_UPLOAD_URL", "")
        self.pending: list[tuple[int, dict]] = []
        if not self.url:
            log.warning("CKPT_UPLOAD_URL not set: checkpoint upload disabled, keeping local copies only")

    def submit(self, step: int, snapshot: dict) -> int:
        self.pending.append((step, snapshot))
        return len(self.pending)


def write_safetensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> dict:
    header: dict = {"__metadata__": metadata}
    offset = 0
    for name, t in tensors.items():
        n = t.numel() * t.element_size()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    snapshot = {}
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name, t in tensors.items():
            snap = t.detach().clone()  # consistent copy for the uploader while training goes on
            snapshot[name] = snap
            f.write(snap.numpy().tobytes())
            f.flush()
            os.fsync(f.fileno())
    return snapshot


def save_checkpoint(ckpt_dir: Path, step: int, model: nn.Module, opt: torch.optim.Optimizer, loss: float,
                    uploader: Uploader) -> None:
    d = ckpt_dir / f"step_{step:06d}"
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    state = {"step": step, "loss": loss, "optimizer": type(opt).__name__,
             "lr": opt.param_groups[0]["lr"], "betas": list(opt.param_groups[0]["betas"]),
             "weight_decay": opt.param_groups[0]["weight_decay"], "weights": "model.safetensors",
             "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    (d / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    (ckpt_dir / "latest").write_text(d.name + "\n")
    log.info("saving checkpoint step %d -> %s", step, d)
    snap = write_safetensors(d / "model.safetensors", model.state_dict(), {"format": "pt", "step": str(step)})
    pending = uploader.submit(step, snap)
    size = (d / "model.safetensors").stat().st_size / 2**20
    log.info("checkpoint step %d saved (%.1f MiB in %.2fs); %d pending upload; rss %.0f MB",
             step, size, time.time() - t0, pending, rss_mb())


class ClickModel(nn.Module):
    def __init__(self, n_items: int, dim: int, width: int) -> None:
        super().__init__()
        self.user = nn.Sequential(nn.Linear(64, width), nn.GELU(), nn.Linear(width, dim))
        self.head = nn.Sequential(nn.Linear(2 * dim, width), nn.GELU(), nn.Linear(width, width), nn.GELU(),
                                  nn.Linear(width, 1))
        self.items = nn.Embedding(n_items, dim)  # pretrained item table, frozen
        self.items.weight.requires_grad_(False)

    def forward(self, user_feats: torch.Tensor, item_ids: torch.Tensor) -> torch.Tensor:
        u = self.user(user_feats)
        v = self.items(item_ids)
        return self.head(torch.cat([u, v], 1)).squeeze(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--save-every", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--n-items", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--ckpt-dir", default="ckpt")
    args = ap.parse_args()

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    torch.manual_seed(0)
    torch.set_num_threads(2)
    log.info("args: %s", vars(args))
    model = ClickModel(args.n_items, args.dim, args.width)
    with torch.no_grad():  # stands in for loading the pretrained table
        model.items.weight.copy_(torch.randn(args.n_items, args.dim, generator=torch.Generator().manual_seed(7)) / 4)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01)
    n_all = sum(p.numel() for p in model.parameters())
    log.info("model: %.1fM parameters (%.2fM trainable, item table frozen)", n_all / 1e6,
             sum(p.numel() for p in trainable) / 1e6)
    uploader = Uploader()
    ckpt_dir = Path(args.ckpt_dir)
    gen = torch.Generator().manual_seed(1)
    a_true = torch.randn(64, generator=gen) / 4
    b_true = torch.randn(args.dim, generator=gen) * 2
    t_last = time.time()
    for step in range(1, args.steps + 1):
        feats = torch.randn(args.batch_size, 64, generator=gen)
        items = torch.randint(0, args.n_items, (args.batch_size,), generator=gen)
        with torch.no_grad():
            score = feats @ a_true + model.items.weight[items] @ b_true
            y = (torch.rand(args.batch_size, generator=gen) < torch.sigmoid(score)).float()
        loss = nn.functional.binary_cross_entropy_with_logits(model(feats, items), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % args.log_every == 0:
            dt = (time.time() - t_last) / args.log_every * 1000
            t_last = time.time()
            log.info("step %d/%d loss %.4f lr %.2e rss %.0f MB %.1f ms/step", step, args.steps, loss.item(),
                     args.lr, rss_mb(), dt)
        if step % args.save_every == 0:
            save_checkpoint(ckpt_dir, step, model, opt, loss.item(), uploader)
            t_last = time.time()
    log.info("training finished after %d steps", args.steps)


if __name__ == "__main__":
    main()
