"""DDP training of TinyLM, gloo backend on CPU, launched by torchrun; trains by epochs over per-rank data.

Every rank prints its own progress line each step (so a shared console interleaves them).
Rank r reads shards r, r+W, ... (numpy arrays) or sample files r, r+W, ... (.npz, one sample each).

Knobs added for the tenth trial:
  --calib-rows N     rank 0 keeps the logits of N held-out rows at every eval, to fit a softmax temperature at the end
  --track-best       each rank tracks the best loss on its own validation slice; on a new best, the per-rank values
                     are gathered for the record (rank 0 saves best.pt)
  --tracker-url      POST metrics to a tracker from a background uploader thread (restarted if it dies)
  --amp              mixed precision as on the GPU cluster (GradScaler; bf16 autocast on CPU)
  --spike-warn F     warn about (but keep) a batch whose loss exceeds F x the running mean
"""

from __future__ import annotations

import argparse
import datetime
import faulthandler
import json
import logging
import math
import queue
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from common import SEQ, StepTimer, TinyLM, dump_config, lm_loss, progress, setup_logging
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset


class ShardRows(Dataset):
    def __init__(self, files: list[Path], log: logging.Logger) -> None:
        x = np.concatenate([np.load(f) for f in files])
        keep = (x >= 0).all(1)
        if (~keep).any():
            log.warning("dropped %d records shorter than %d tokens", int((~keep).sum()), SEQ + 1)
        self.x = torch.from_numpy(x[keep])

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.x[i]


class SampleFiles(Dataset):
    def __init__(self, files: list[Path]) -> None:
        self.files = files

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> torch.Tensor:
        with np.load(self.files[i]) as z:
            return torch.from_numpy(z["tokens"][: int(z["length"])])


class MetricsClient:
    """Posts metrics from a background thread; a failed post is logged and retried."""

    def __init__(self, url: str, log: logging.Logger) -> None:
        self.url, self.log, self.q = url, log, queue.Queue()
        threading.Thread(target=self._run, daemon=True, name="metrics-uploader").start()

    def post(self, rec: dict) -> None:
        self.q.put(rec)

    def _run(self) -> None:
        while True:
            rec = self.q.get()
            for attempt in range(1, 8):
                try:
                    req = urllib.request.Request(self.url, data=json.dumps(rec).encode(), method="POST",
                                                 headers={"Content-Type": "application/json"})
                    urllib.request.urlopen(req, timeout=5).read()
                    if attempt > 1:
                        self.log.info("metrics upload for step %d succeeded on attempt %d", rec["step"], attempt)
                    break
                except Exception:
                    self.log.exception("metrics upload failed (step %d, attempt %d/7), retrying in %ds",
                                       rec["step"], attempt, 2 ** attempt)
                    time.sleep(2 ** attempt)


class TrackerClient:
    """Posts metrics from a background thread; the thread gives up after 3 failed attempts and is restarted
    by the trainer at its next post."""

    def __init__(self, url: str, log: logging.Logger) -> None:
        self.url, self.log, self.q, self.restarts = url, log, queue.Queue(), 0
        self.thread = self._start()

    def _start(self) -> threading.Thread:
        t = threading.Thread(target=self._run, daemon=True, name=f"tracker-uploader-{self.restarts}")
        t.start()
        return t

    def post(self, rec: dict) -> None:
        if not self.thread.is_alive():
            self.restarts += 1
            self.log.warning("tracker uploader thread is not alive; restarting it (restart %d), %d records queued",
                             self.restarts, self.q.qsize())
            self.thread = self._start()
        self.q.put(rec)

    def _run(self) -> None:
        while True:
            rec = self.q.get()
            for attempt in range(1, 4):
                try:
                    req = urllib.request.Request(self.url, data=json.dumps(rec).encode(), method="POST",
                                                 headers={"Content-Type": "application/json"})
                    urllib.request.urlopen(req, timeout=5).read()
                    break
                except urllib.error.URLError:
                    self.log.warning("tracker post failed (step %d, attempt %d/3)", rec["step"], attempt, exc_info=True)
                    time.sleep(2)
            else:
                self.q.put(rec)
                raise RuntimeError(f"tracker unreachable at {self.url}, uploader thread exiting")


def upload_file(url: str, path: Path, log: logging.Logger, tries: int = 6) -> None:
    for attempt in range(1, tries + 1):
        try:
            req = urllib.request.Request(f"{url}/{path.name}", data=path.read_bytes(), method="PUT")
            urllib.request.urlopen(req, timeout=10).read()
            log.info("synced %s to %s (attempt %d)", path.name, url, attempt)
            return
        except OSError as e:
            log.warning("checkpoint sync of %s failed (attempt %d/%d): %s; retrying in %ds",
                        path.name, attempt, tries, e, 5 * attempt)
            time.sleep(5 * attempt)
    raise RuntimeError(f"could not sync {path.name} after {tries} attempts")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--format", choices=["npy", "npz"], default="npy")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=0, help="steps between evals (0: at epoch ends only)")
    ap.add_argument("--acc-every", type=int, default=0, help="steps between token-accuracy logs")
    ap.add_argument("--ckpt-every", type=int, default=0)
    ap.add_argument("--skip-spikes", type=float, default=0.0,
                    help="skip a batch whose loss exceeds this factor times the previous epoch's mean")
    ap.add_argument("--metrics-url", default="")
    ap.add_argument("--sync-url", default="")
    ap.add_argument("--out", default="checkpoints")
    ap.add_argument("--calib-rows", type=int, default=0)
    ap.add_argument("--track-best", action="store_true")
    ap.add_argument("--tracker-url", default="")
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--spike-warn", type=float, default=0.0)
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
    if a.format == "npy":
        files = sorted(Path(a.data).glob("train-*.npy"))
        mine = files[rank::world]
        ds = ShardRows(mine, log)
    else:
        files = sorted(Path(a.data).glob("*.npz"))
        mine = files[rank::world]
        ds = SampleFiles(mine)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=False, drop_last=False, num_workers=a.workers)
    steps_per_epoch = len(loader)
    total = steps_per_epoch * a.epochs
    cfg = {"model": {"name": "tinylm", "d_model": 48, "vocab": 256, "seq_len": SEQ},
           "optim": {"name": "adamw", "lr": a.lr, "betas": [0.9, 0.95], "weight_decay": 0.1,
                     "warmup_steps": 300, "schedule": "cosine", "clip_grad_norm": 1.0},
           "data": {"path": a.data, "format": a.format, "files": len(files), "files_this_rank": len(mine),
                    "num_workers": a.workers, "micro_batch_size": a.batch, "drop_last": False, "shuffle": False},
           "dist": {"backend": "gloo", "world_size": world, "timeout_s": a.timeout},
           "train": {"epochs": a.epochs, "eval_every": a.eval_every or "epoch", "token_acc_every": a.acc_every,
                     "ckpt_every": a.ckpt_every or "epoch", "skip_loss_spikes": a.skip_spikes or None,
                     "metrics_endpoint": a.metrics_url or None, "checkpoint_sync": a.sync_url or None,
                     "tracker": a.tracker_url or None, "amp": a.amp, "track_best": a.track_best,
                     "temperature_calibration": {"rows": a.calib_rows} if a.calib_rows else None}}
    if rank == 0:
        dump_config(log, cfg)
    log.info("rank %d/%d: %d samples from %d files (%s ... %s), %d batches per epoch", rank, world, len(ds),
             len(mine), mine[0].name, mine[-1].name, steps_per_epoch)

    model = DDP(TinyLM(), find_unused_parameters=True)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)

    def lr_at(step: int) -> float:
        if step < 300:
            return a.lr * (step + 1) / 300
        return a.lr * 0.5 * (1 + math.cos(math.pi * (step - 300) / max(1, total - 300)))

    metrics = MetricsClient(a.metrics_url, log) if a.metrics_url and rank == 0 else None
    tracker = None
    if a.tracker_url and rank == 0:
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except Exception:
            log.warning("tensorboard logging unavailable, metrics go to the tracker only", exc_info=True)
        tracker = TrackerClient(a.tracker_url, log)
    scaler = torch.cuda.amp.GradScaler() if a.amp else None
    calib_x, calib_logits = None, []
    if a.calib_rows and rank == 0:
        calib_x = torch.from_numpy(np.concatenate([np.load(f)[-a.calib_rows // len(files):] for f in files]))
        calib_x = calib_x[(calib_x >= 0).all(1)]
        log.info("temperature calibration set: %d rows (%d tokens)", len(calib_x), calib_x[:, 1:].numel())
    local_val = torch.from_numpy(np.load(mine[0])[-64:]) if a.track_best else None
    best_local = float("inf")
    run_mean = None
    held_out = torch.from_numpy(np.load(files[0])[-64:]) if a.format == "npy" else None
    if held_out is not None:
        held_out = held_out[(held_out >= 0).all(1)]
    timer = StepTimer()
    step = 0
    prev_mean = None
    for epoch in range(a.epochs):
        loss_sum, n = 0.0, 0
        log.info("epoch %d/%d start", epoch + 1, a.epochs)
        for batch in loader:
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            if a.amp:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = lm_loss(model, batch)
            else:
                loss = lm_loss(model, batch)
            if a.spike_warn and run_mean is not None and loss.item() > a.spike_warn * run_mean:
                log.warning("loss spike at step %d: %.4f > %.1f x running mean %.4f (batch kept)", step + 1,
                            loss.item(), a.spike_warn, run_mean)
            run_mean = loss.item() if run_mean is None else 0.98 * run_mean + 0.02 * loss.item()
            if a.skip_spikes and prev_mean is not None and loss.item() > a.skip_spikes * prev_mean:
                log.warning("loss spike %.4f > %.1f x epoch mean %.4f: skipping this batch", loss.item(),
                            a.skip_spikes, prev_mean)
                continue
            opt.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            step += 1
            loss_sum += loss.item()
            n += 1
            if a.debug_grads:
                for name, p in model.module.named_parameters():
                    glog.debug("step %d grad_norm/%s %.6f param_norm %.4f", step, name,
                               float(p.grad.norm()) if p.grad is not None else 0.0, float(p.detach().norm()))
            ms = timer.lap()
            progress(log, step, total, epoch + 1, loss.item(), lr_at(step - 1), gn.item(),
                     batch.shape[0] * SEQ * 1000 / ms, ms)
            if a.acc_every and step % a.acc_every == 0:
                with torch.no_grad():
                    pred = model.module(batch[:, :-1]).argmax(-1)
                    acc = (pred == batch[:, 1:]).float().view(a.batch, SEQ).mean(1)  # per-sample accuracy
                log.info("step %d token_acc mean %.4f min %.4f max %.4f", step, acc.mean(), acc.min(), acc.max())
            if metrics is not None and step % 100 == 0:
                metrics.post({"step": step, "loss": loss.item(), "lr": lr_at(step - 1), "epoch": epoch + 1})
            if tracker is not None and step % 50 == 0:
                tracker.post({"step": step, "loss": loss.item(), "lr": lr_at(step - 1), "epoch": epoch + 1})
            if a.eval_every and step % a.eval_every == 0 and held_out is not None:
                with torch.no_grad():
                    ev = lm_loss(model.module, held_out).detach()
                dist.all_reduce(ev)
                log.info("eval @ step %d: eval_loss %.4f", step, ev.item() / world)
                if calib_x is not None:
                    with torch.no_grad():
                        calib_logits.append(model.module(calib_x[:, :-1]).float())
                    log.info("calibration: stored eval logits %d (%d x %d x %d)", len(calib_logits),
                             *calib_logits[-1].shape)
                if local_val is not None:
                    with torch.no_grad():
                        lv = lm_loss(model.module, local_val).detach()
                    if lv.item() < best_local:
                        best_local = lv.item()
                        vals = [torch.zeros(1) for _ in range(world)]
                        dist.all_gather(vals, lv.reshape(1))
                        log.info("new best validation loss %.4f at step %d (all ranks: %s)", lv.item(), step,
                                 " ".join(f"{v.item():.4f}" for v in vals))
                        if rank == 0:
                            save(a, model, opt, step, log, name="best.pt")
                    else:
                        log.info("validation loss %.4f at step %d (best %.4f)", lv.item(), step, best_local)
            if a.ckpt_every and step % a.ckpt_every == 0 and rank == 0:
                save(a, model, opt, step, log)
        dist.barrier()
        prev_mean = loss_sum / max(n, 1)
        if held_out is not None:
            with torch.no_grad():
                ev = lm_loss(model.module, held_out).detach()
            dist.all_reduce(ev)
            log.info("epoch %d done at step %d: train_loss %.4f eval_loss %.4f ppl %.2f", epoch + 1, step,
                     prev_mean, ev.item() / world, math.exp(min(ev.item() / world, 20)))
        else:
            log.info("epoch %d done at step %d: train_loss %.4f", epoch + 1, step, prev_mean)
        if rank == 0 and not a.ckpt_every:
            save(a, model, opt, step, log)
    dist.barrier()
    if calib_logits:
        y = calib_x[:, 1:].reshape(-1)
        nll = [torch.nn.functional.cross_entropy(calib_logits[-1].reshape(-1, 256) / t, y).item()
               for t in (0.8, 0.9, 1.0, 1.1, 1.2)]
        log.info("temperature calibration over %d evals: nll by T %s", len(calib_logits),
                 " ".join(f"{v:.4f}" for v in nll))
    log.info("training complete after %d steps", step)
    dist.destroy_process_group()


def save(a, model, opt, step: int, log: logging.Logger, name: str = "") -> None:
    Path(a.out).mkdir(parents=True, exist_ok=True)
    p = Path(a.out) / (name or f"step_{step:06d}.pt")
    torch.save({"model": model.module.state_dict(), "optim": opt.state_dict(), "step": step}, p)
    log.info("saved checkpoint %s", p)
    if a.sync_url:
        upload_file(a.sync_url, p, log)


if __name__ == "__main__":
    main()
