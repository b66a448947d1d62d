"""DDP training of TinyLM by epochs over JSONL shards (gloo, CPU, torchrun), with a data loader that
skips records it cannot parse (logging a warning) instead of failing. Each rank streams its own
shards; batches are full-size only (drop_last). At each epoch end the ranks average an eval loss
with an all_reduce.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import math
from pathlib import Path

import torch
import torch.distributed as dist
from common import SEQ, StepTimer, TinyLM, dump_config, lm_loss, progress, setup_logging
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset


class TolerantShardStream(IterableDataset):
    def __init__(self, files: list[Path]) -> None:
        self.files = files

    def __iter__(self):
        log = logging.getLogger("data")
        for path in self.files:
            log.info("worker opening shard %s", path.name)
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError as e:
                        log.warning("skipping unreadable record %s:%d (%s)", path.name, n, e)
                        continue
                    yield torch.tensor(rec["tokens"], dtype=torch.long)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--debug-grads", action="store_true")
    a = ap.parse_args()

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
    cfg = {"model": {"name": "tinylm", "d_model": 48, "seq_len": SEQ},
           "optim": {"name": "adamw", "lr": a.lr}, "data": {"path": a.data, "num_shards": len(files),
           "skip_unreadable_records": True, "drop_last": True, "micro_batch_size": a.batch},
           "dist": {"backend": "gloo", "world_size": world, "timeout_s": a.timeout}, "train": {"epochs": a.epochs}}
    if rank == 0:
        dump_config(log, cfg)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    loader = DataLoader(TolerantShardStream(mine), batch_size=a.batch, num_workers=1, drop_last=True)
    val = torch.randint(0, 256, (16, SEQ + 1), generator=torch.Generator().manual_seed(7))
    timer = StepTimer()
    step = 0
    for epoch in range(a.epochs):
        n = 0
        for batch in loader:
            loss = lm_loss(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            n += 1
            if a.debug_grads:
                for name, p in model.module.named_parameters():
                    glog.debug("step %d grad_norm/%s %.6f param_norm %.4f", step, name,
                               float(p.grad.norm()) if p.grad is not None else 0.0, float(p.detach().norm()))
            ms = timer.lap()
            progress(log, step, 0, epoch, loss.item(), a.lr, gn.item(), a.batch * SEQ * 1000 / ms, ms)
        log.info("epoch %d: %d batches on this rank, entering end-of-epoch eval", epoch, n)
        with torch.no_grad():
            ev = lm_loss(model.module, val).reshape(1)
        dist.all_reduce(ev)
        log.info("epoch %d eval_loss %.4f ppl %.2f", epoch, ev.item() / world, math.exp(min(ev.item() / world, 20)))
    dist.barrier()
    log.info("training complete after %d steps", step)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
