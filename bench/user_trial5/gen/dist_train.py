"""DDP training of TinyLM over JSONL shards, gloo backend on CPU, launched by torchrun.

Every rank prints its own progress line each step (so a shared console interleaves them).
Each rank streams its own shards (rank r reads shards r, r+W, r+2W, ...) in a DataLoader worker.
"""

from __future__ import annotations

import argparse
import datetime
import faulthandler
import json
import logging
import math
import signal
from pathlib import Path

import torch
import torch.distributed as dist
from common import SEQ, StepTimer, TinyLM, dump_config, lm_loss, progress, setup_logging
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset

# (three lines kept so line numbers match the tracebacks in the stored trial logs:
#  the imports were lint-fixed after the runs)


class ShardStream(IterableDataset):
    def __init__(self, files: list[Path]) -> None:
        self.files = files

    def __iter__(self):
        log = logging.getLogger("data")
        for path in self.files:
            log.info("worker opening shard %s", path.name)
            with open(path) as f:
                for line in f:
                    rec = json.loads(line)
                    yield torch.tensor(rec["tokens"], dtype=torch.long)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--ckpt-every", type=int, default=5000)
    ap.add_argument("--out", default="checkpoints")
    ap.add_argument("--debug-grads", action="store_true", help="log every parameter's grad norm each step")
    a = ap.parse_args()

    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)  # stacks in stderr if the launcher kills us
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    log = setup_logging(rank)
    glog = logging.getLogger("trainer.grads")
    if a.debug_grads:
        logging.getLogger().setLevel(logging.DEBUG)
    files = sorted(Path(a.data).glob("train-*.jsonl"))
    mine = files[rank::world]
    cfg = {"model": {"name": "tinylm", "d_model": 48, "vocab": 256, "seq_len": SEQ},
           "optim": {"name": "adamw", "lr": a.lr, "betas": [0.9, 0.95], "weight_decay": 0.1,
                     "warmup_steps": 500, "schedule": "cosine"},
           "data": {"path": a.data, "num_shards": len(files), "shards_this_rank": len(mine),
                    "num_workers": 1, "micro_batch_size": a.batch},
           "dist": {"backend": "gloo", "world_size": world, "timeout_s": a.timeout},
           "train": {"max_steps": a.steps, "eval_every": a.eval_every, "ckpt_every": a.ckpt_every}}
    if rank == 0:
        dump_config(log, cfg)
    log.info("rank %d/%d will stream %d shards (%s ... %s)", rank, world, len(mine), mine[0].name, mine[-1].name)

    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)

    def lr_at(step: int) -> float:
        if step < 500:
            return a.lr * (step + 1) / 500
        return a.lr * 0.5 * (1 + math.cos(math.pi * (step - 500) / max(1, a.steps - 500)))

    loader = DataLoader(ShardStream(mine), batch_size=a.batch, num_workers=1)
    held_out = torch.randint(0, 256, (16, SEQ + 1))
    timer = StepTimer()
    step, epoch = 0, 0
    it = iter(loader)
    while step < a.steps:
        try:
            batch = next(it)
        except StopIteration:
            epoch += 1
            log.info("epoch %d done, restarting shard stream", epoch)
            it = iter(loader)
            continue
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = lm_loss(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if a.debug_grads:
            for name, p in model.module.named_parameters():
                glog.debug("step %d grad_norm/%s %.6f param_norm %.4f", step, name,
                           float(p.grad.norm()) if p.grad is not None else 0.0, float(p.detach().norm()))
        ms = timer.lap()
        progress(log, step, a.steps, epoch, loss.item(), lr_at(step - 1), gn.item(), a.batch * SEQ * 1000 / ms, ms)
        if step % a.eval_every == 0:
            with torch.no_grad():
                ev = lm_loss(model.module, held_out).detach()
            dist.all_reduce(ev)
            ev /= world
            log.info("eval @ step %d: eval_loss %.4f ppl %.2f", step, ev.item(), math.exp(min(ev.item(), 20)))
        if step % a.ckpt_every == 0 and rank == 0:
            Path(a.out).mkdir(parents=True, exist_ok=True)
            p = Path(a.out) / f"step_{step:06d}.pt"
            torch.save({"model": model.module.state_dict(), "optim": opt.state_dict(), "step": step}, p)
            log.info("saved checkpoint %s", p)
    dist.barrier()
    log.info("training complete after %d steps", step)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
