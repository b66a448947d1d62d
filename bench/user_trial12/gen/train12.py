"""TinyLM training for the twelfth trial: single process, or DDP (gloo) when launched by torchrun.

Prints what a research loop prints: config dump, one progress line per step (per rank), per-parameter grad-norm
DEBUG lines, eval and checkpoint lines, and the warnings the libraries really emit.

Data: --data DIR of shards. Formats:
  npy     train-*.npy arrays (rows x 33 tokens), streamed by an IterableDataset over DataLoader workers
  packed  train-*.bin (uint16 tokens) + train-*.idx (int64 row offsets), read through an mmap with a libc memmove
Knobs (the fault of each case is in run_cases.sh, not here):
  --loss-impl {torch,fast_half}  fast_half: softmax/xent computed by hand in float16 (no max subtraction)
  --ckpt-async                   rank 0 writes checkpoints from a background thread
  --ckpt-staging DIR             write the checkpoint to DIR first, then os.rename it into --out
  --train-acc                    keep the step logits for a per-epoch train accuracy
  --tracker-url URL              post metrics (retried); --init-scale for the GradScaler; --resume
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import faulthandler
import json
import logging
import math
import mmap
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from common import SEQ, StepTimer, TinyLM, dump_config, progress, setup_logging
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

libc = ctypes.CDLL(None)


class StreamShards(IterableDataset):
    def __init__(self, files, log, fmt="npy"):
        self.files, self.log, self.fmt = files, log, fmt

    def rows(self, f):
        if self.fmt == "npy":
            yield from np.load(f)
            return
        idx = np.fromfile(f.with_suffix(".idx"), dtype=np.int64)
        with open(f, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            buf = np.frombuffer(mm, dtype=np.uint8)
            base = buf.ctypes.data
            for i in range(len(idx) - 1):
                n = SEQ + 1  # fixed-length records
                out = np.empty(n, dtype=np.uint16)
                libc.memmove(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(base + 2 * int(idx[i])),
                             ctypes.c_size_t(2 * n))
                yield out.astype(np.int64)
            del buf

    def __iter__(self):
        wi = get_worker_info()
        files = self.files if wi is None else self.files[wi.id::wi.num_workers]
        for f in files:
            logging.getLogger("trainer.data").debug("opening shard %s", f.name)
            for r in self.rows(f):
                yield torch.from_numpy(np.asarray(r))


def xent(logits, target, impl):
    if impl == "torch":
        return nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1))
    z = logits.reshape(-1, logits.size(-1)).half()
    lse = torch.log(torch.exp(z).sum(-1))
    return (lse - z.gather(1, target.reshape(-1, 1)).squeeze(1)).float().mean()


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


class Tracker:
    def __init__(self, url, log):
        self.url, self.log = url, log

    def post(self, rec):
        for attempt in range(1, 6):
            try:
                req = urllib.request.Request(self.url, data=json.dumps(rec).encode(), method="POST",
                                             headers={"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=5).read()
                if attempt > 1:
                    self.log.info("tracker upload for step %d succeeded on attempt %d", rec["step"], attempt)
                return
            except urllib.error.URLError:
                self.log.warning("tracker upload failed (step %d, attempt %d/5), retrying in %ds", rec["step"],
                                 attempt, attempt * 2, exc_info=True)
                time.sleep(attempt * 2)
        self.log.error("tracker upload for step %d dropped after 5 attempts (metrics kept in the local log)",
                       rec["step"])


class Checkpointer:
    def __init__(self, a, log, rank):
        self.a, self.log, self.rank = a, log, rank
        self.state_lock = threading.Lock()   # guards the model/optimizer state while it is copied
        self.meta_lock = threading.Lock()    # guards the run metadata (step, lr, last save)
        self.meta = {"step": 0, "last_save": None}

    def save(self, model, opt, step):
        if self.a.ckpt_async:
            t = threading.Thread(target=self._save_async, args=(model, opt, step), name=f"ckpt-{step}")
            t.start()
            self.log.info("async checkpoint of step %d started (thread %s)", step, t.name)
        else:
            self._write(model, opt, step)

    def _save_async(self, model, opt, step):
        with self.state_lock:
            sd = {"model": {k: v.clone() for k, v in model.state_dict().items()}, "optim": opt.state_dict()}
            time.sleep(0.3)  # serialise to bytes
            with self.meta_lock:
                sd["meta"] = dict(self.meta)
        self._write_sd(sd, step)

    def snapshot_meta(self, step, lr):
        with self.meta_lock:
            self.meta["step"], self.meta["lr"] = step, lr
            with self.state_lock:
                self.meta["params"] = 0

    def _write(self, model, opt, step):
        self._write_sd({"model": model.state_dict(), "optim": opt.state_dict(), "meta": {"step": step}}, step)

    def _write_sd(self, sd, step):
        out = Path(self.a.out)
        out.mkdir(parents=True, exist_ok=True)
        name = f"checkpoint-{step:06d}.pt"
        if self.a.ckpt_staging:
            st = Path(self.a.ckpt_staging)
            st.mkdir(parents=True, exist_ok=True)
            torch.save(sd, st / name)
            self.log.info("wrote %s (%d bytes) to staging", name, (st / name).stat().st_size)
            os.rename(st / name, out / name)
        else:
            torch.save(sd, out / name)
        self.log.info("saved checkpoint %s", out / name)
        self.meta["last_save"] = name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--format", choices=["npy", "packed"], default="npy")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--d-model", type=int, default=48)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--ckpt-every", type=int, default=500)
    ap.add_argument("--out", default="checkpoints")
    ap.add_argument("--loss-impl", default="torch")
    ap.add_argument("--ckpt-async", action="store_true")
    ap.add_argument("--ckpt-staging", default="")
    ap.add_argument("--train-acc", action="store_true")
    ap.add_argument("--tracker-url", default="")
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--init-scale", type=float, default=65536.0)
    ap.add_argument("--skip-short", action="store_true")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--debug-grads", action="store_true")
    a = ap.parse_args()

    faulthandler.enable()
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.timeout))
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    log = setup_logging(rank if distributed else None)
    glog = logging.getLogger("trainer.grads")
    if a.debug_grads:
        logging.getLogger().setLevel(logging.DEBUG)
    files = sorted(Path(a.data).glob("train-*.npy" if a.format == "npy" else "train-*.bin"))
    mine = files[rank::world]
    ds = StreamShards(mine, log, a.format)
    loader = DataLoader(ds, batch_size=a.batch, num_workers=a.workers)
    cfg = {"model": {"name": "tinylm", "d_model": a.d_model, "vocab": 256, "seq_len": SEQ},
           "optim": {"name": "adamw", "lr": a.lr, "betas": [0.9, 0.95], "weight_decay": a.wd, "warmup_steps": 200,
                     "schedule": "cosine", "clip_grad_norm": 1.0, "max_steps": a.steps},
           "loss": {"impl": a.loss_impl},
           "precision": {"amp": a.amp, "init_scale": a.init_scale if a.amp else None},
           "data": {"path": a.data, "format": a.format, "shards": len(files), "shards_this_rank": len(mine),
                    "num_workers": a.workers, "micro_batch_size": a.batch, "skip_short_batches": a.skip_short},
           "dist": {"backend": "gloo" if distributed else None, "world_size": world, "timeout_s": a.timeout},
           "checkpoint": {"every": a.ckpt_every, "dir": a.out, "async": a.ckpt_async,
                          "staging_dir": a.ckpt_staging or None, "resume": a.resume},
           "eval": {"every": a.eval_every, "train_accuracy": a.train_acc}, "tracker": a.tracker_url or None}
    if rank == 0:
        dump_config(log, cfg)
    log.info("rank %d/%d: %d shards (%s ... %s)", rank, world, len(mine), mine[0].name, mine[-1].name)
    model = TinyLM(a.d_model)
    if distributed:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model)
    core = model.module if distributed else model
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=a.wd)
    scaler = None
    if a.amp:
        import warnings
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", FutureWarning)
                scaler = torch.cuda.amp.GradScaler(init_scale=a.init_scale)
        except FutureWarning:
            log.warning("legacy torch.cuda.amp.GradScaler API raised a deprecation; using torch.amp.GradScaler('cpu')",
                        exc_info=True)
            scaler = torch.amp.GradScaler("cpu", init_scale=a.init_scale)
    if a.tracker_url:
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except Exception:
            log.warning("TensorBoard writer unavailable, falling back to the HTTP tracker", exc_info=True)
    tracker = Tracker(a.tracker_url, log) if a.tracker_url and rank == 0 else None
    ck = Checkpointer(a, log, rank)
    start = 0
    if a.resume:
        cks = sorted(Path(a.out).glob("checkpoint-*.pt"), key=lambda p: int(re.findall(r"\d+", p.stem)[-1]))
        if cks:
            sd = torch.load(cks[-1], weights_only=False)
            core.load_state_dict(sd["model"])
            opt.load_state_dict(sd["optim"])
            start = sd["meta"]["step"]
            log.info("resumed from %s at step %d (%d checkpoints found)", cks[-1], start, len(cks))
        else:
            log.info("no checkpoint in %s, starting from scratch", a.out)
    held = torch.from_numpy(np.load(Path(a.data) / "heldout.npy"))

    def lr_at(s):
        if s < 200:
            return a.lr * (s + 1) / 200
        return a.lr * 0.5 * (1 + math.cos(math.pi * (s - 200) / max(1, a.steps - 200)))

    def data_iter():
        ep = 0
        while True:
            ep += 1
            log.info("epoch %d start (data pass over %d shards)", ep, len(mine))
            for b in loader:
                yield ep, b

    it = data_iter()
    if start:
        log.info("fast-forwarding the data stream by %d batches", start)
        for _ in range(start):
            next(it)
    timer = StepTimer()
    step = start
    acc_logits = []
    while step < a.steps:
        ep, batch = next(it)
        if a.skip_short and batch.shape[0] < a.batch:
            log.warning("skipping short batch at step %d: %d rows < micro batch %d", step + 1, batch.shape[0], a.batch)
            continue
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x, y = batch[:, :-1], batch[:, 1:]
        logits = model(x)  # (--amp: loss scaling only; the model stays float32 on CPU)
        loss = xent(logits.float(), y, a.loss_impl)
        opt.zero_grad(set_to_none=True)
        if scaler is not None:
            old = scaler.get_scale()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            if scaler.get_scale() < old:
                log.warning("gradient overflow at step %d: optimizer step skipped, loss scale %.3g -> %.3g",
                            step + 1, old, scaler.get_scale())
        else:
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        step += 1
        if a.train_acc:
            acc_logits.append(logits)
        if a.debug_grads:
            for name, p in core.named_parameters():
                glog.debug("step %d grad_norm/%s %.6f param_norm %.4f", step, name,
                           float(p.grad.norm()) if p.grad is not None else 0.0, float(p.detach().norm()))
        ms = timer.lap()
        extra = f" | rss {rss_mib():.0f} MiB" if step % 50 == 0 else ""
        progress(log, step, a.steps, ep, loss.item(), lr_at(step - 1), gn.item(), x.numel() * 1000 / ms, ms, extra)
        if distributed and a.ckpt_async and rank == 0:
            ck.snapshot_meta(step, lr_at(step - 1))
        if step % a.eval_every == 0:
            with torch.no_grad():
                ev = xent(core(held[:, :-1]).float(), held[:, 1:], a.loss_impl).detach()
            if distributed:
                dist.all_reduce(ev)
            ev = ev.item() / world
            log.info("eval @ step %d: eval_loss %.4f ppl %.2f", step, ev, math.exp(min(ev, 30)))
            if a.train_acc and acc_logits:
                log.info("train accuracy buffer: %d batches", len(acc_logits))
            if tracker is not None:
                tracker.post({"step": step, "loss": loss.item(), "eval_loss": ev})
        if step % a.ckpt_every == 0 and rank == 0:
            ck.save(core, opt, step)
    if distributed:
        dist.barrier()
    log.info("training complete after %d steps", step)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
