"""Single-process TinyLM training on CPU with the knobs the trial's single-process cases need.

Each knob reproduces a real mistake, not a simulated message:
  --milestones/--gamma     a MultiStepLR whose gamma multiplies instead of decays (gamma=10)
  --keep-eval-outputs      eval outside torch.no_grad() keeping every eval's logits (and graphs) for
                           a later plot: memory grows at each eval
  --ckpt-dir/--keep-all    every checkpoint kept in a size-limited mount (no rotation)
  --upload-thread          an 'async upload' thread holding the dataset cache lock while the
                           DataLoader forks its workers for the next epoch (fork with a held lock)
  --amp-fp16               float16 autocast with a dynamic loss scale (overflow steps are skipped)
  --fetch-url              a tokenizer download that is retried, then served from the local cache
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import resource
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import torch
from common import SEQ, Bar, StepTimer, TinyLM, dump_config, lm_loss, markov_tokens, progress, setup_logging
from torch.utils.data import DataLoader, Dataset

# (two lines kept so line numbers match the tracebacks in the stored trial logs)

CACHE_LOCK = threading.Lock()


class TokenSet(Dataset):
    def __init__(self, n: int, seed: int, augment_cost: int = 0) -> None:
        self.data = torch.from_numpy(markov_tokens(np.random.default_rng(seed), n))
        self.cache: dict[int, torch.Tensor] = {}
        self.augment_cost = augment_cost

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> torch.Tensor:
        with CACHE_LOCK:
            x = self.cache.get(i)
            if x is None:
                x = self.data[i].clone()
                self.cache[i] = x
        if self.augment_cost:  # CPU-bound per-sample work (a span-corruption style augmentation)
            r = np.random.default_rng(i)
            keep = np.argsort(r.random(self.augment_cost))[: SEQ + 1] % (SEQ + 1)
            x = x[np.sort(keep)] if r.random() < 0.0 else x
        return x


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def fetch_tokenizer(log, url: str, retries: int = 3) -> None:
    for attempt in range(1, retries + 1):
        try:
            urllib.request.urlopen(url, timeout=5)
            return
        except OSError as e:
            log.warning("tokenizer download failed (attempt %d/%d): %r; retrying in 2s", attempt, retries, e)
            time.sleep(2)
    log.warning("could not reach %s, using the cached tokenizer at ~/.cache/tinylm/tokenizer.json", url)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--train-size", type=int, default=50000)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--milestones", default="")
    ap.add_argument("--gamma", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--eval-every", type=int, default=2000)
    ap.add_argument("--ckpt-every", type=int, default=5000)
    ap.add_argument("--ckpt-dir", default="checkpoints")
    ap.add_argument("--keep-eval-outputs", action="store_true")
    ap.add_argument("--augment-cost", type=int, default=0, help="size of the per-sample augmentation work")
    ap.add_argument("--persistent-workers", action="store_true")
    ap.add_argument("--debug-grads", action="store_true", help="log every parameter's grad norm each step")
    ap.add_argument("--upload-thread", action="store_true")
    ap.add_argument("--amp-fp16", action="store_true")
    ap.add_argument("--fetch-url", default="")
    ap.add_argument("--spike-at", type=int, default=0, help="300 steps of uniform noise batches (a bad data window)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--optim", default="adamw", choices=["adamw", "sgd"])
    ap.add_argument("--tqdm", action="store_true", help="a tqdm bar on stderr besides the log lines")
    a = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    log = setup_logging(None)
    cfg = {"model": {"name": "tinylm", "d_model": 48, "vocab": 256, "seq_len": SEQ},
           "optim": {"name": a.optim, "lr": a.lr, "weight_decay": 0.01, "clip_grad_norm": a.clip,
                     "scheduler": {"name": "multistep", "milestones": a.milestones, "gamma": a.gamma}
                     if a.milestones else {"name": "cosine", "warmup_steps": 1000}},
           "data": {"train_size": a.train_size, "batch_size": a.batch, "num_workers": a.workers},
           "train": {"max_steps": a.steps, "eval_every": a.eval_every, "ckpt_every": a.ckpt_every,
                     "ckpt_dir": a.ckpt_dir, "precision": "fp16-mixed" if a.amp_fp16 else "32-true"}}
    dump_config(log, cfg)
    if a.fetch_url:
        fetch_tokenizer(log, a.fetch_url)

    train = TokenSet(a.train_size, a.seed, a.augment_cost)
    val = TokenSet(2048, a.seed)  # same chain, other samples
    val.data = torch.from_numpy(markov_tokens(np.random.default_rng(a.seed), a.train_size + 2048)[-2048:])
    loader = DataLoader(train, batch_size=a.batch, shuffle=True, num_workers=a.workers, drop_last=True,
                        persistent_workers=a.persistent_workers and a.workers > 0)
    log.info("train batches per epoch: %d, val samples %d", len(loader), len(val))
    model = TinyLM()
    if a.optim == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=0.01)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    bar = Bar(a.steps, "train", every=5) if a.tqdm else None
    if a.milestones:
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, [int(m) for m in a.milestones.split(",")], gamma=a.gamma)
    else:
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / 1000) * 0.5 * (1 + math.cos(math.pi * min(s, a.steps) / a.steps)))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16) if a.amp_fp16 else None
    log.info("model parameters: %d", sum(p.numel() for p in model.parameters()))

    running_loss = 0.0
    eval_history: list = []
    glog = logging.getLogger("trainer.grads")
    if a.debug_grads:
        glog.setLevel(logging.DEBUG)
        logging.getLogger().setLevel(logging.DEBUG)
    timer = StepTimer()
    step, epoch = 0, 0
    uploader: threading.Thread | None = None
    while step < a.steps:
        for batch in loader:
            if a.spike_at and a.spike_at <= step < a.spike_at + 300:
                batch = torch.randint(0, 256, batch.shape)  # a window of unlearnable (noise) samples
                if step == a.spike_at:
                    log.info("data: mixing in shard group B (web crawl 2024-09)")
            with torch.autocast("cpu", dtype=torch.float16, enabled=a.amp_fp16):
                loss = lm_loss(model, batch)
            opt.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
                old = scaler.get_scale()
                scaler.step(opt)
                scaler.update()
                if scaler.get_scale() < old:
                    log.warning("Gradient overflow. Skipping step, loss scaler reducing loss scale to %.1f", scaler.get_scale())
            else:
                loss.backward()
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
                opt.step()
            sched.step()
            step += 1
            running_loss += loss.item()
            if a.debug_grads:
                for name, p in model.named_parameters():
                    glog.debug("step %d grad_norm/%s %.6f param_norm %.4f", step, name,
                               float(p.grad.norm()) if p.grad is not None else 0.0, float(p.detach().norm()))
            ms = timer.lap()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{float(loss):.3f}", lr=f"{sched.get_last_lr()[0]:.2e}")
            extra = f" | mem {rss_mb():.0f}MB" if step % 10 == 0 else ""
            progress(log, step, a.steps, epoch, float(loss), sched.get_last_lr()[0], float(gn),
                     a.batch * SEQ * 1000 / ms, ms, extra)
            if step % 200 == 0:
                log.info("avg loss over last 200 steps: %.4f", float(running_loss) / 200)
                running_loss = 0.0
            if step % a.eval_every == 0:
                model.eval()
                if a.keep_eval_outputs:
                    outs = [model(val.data[i:i + 256, :-1]) for i in range(0, 1024, 256)]
                    eval_history.append(outs)
                    logits = torch.cat(outs)
                    ev = float(torch.nn.functional.cross_entropy(logits.reshape(-1, 256), val.data[:1024, 1:].reshape(-1)))
                else:
                    with torch.no_grad():
                        ev = float(lm_loss(model, val.data[:512]))
                model.train()
                log.info("***** eval @ step %d ***** eval_loss = %.4f | eval_ppl = %.3f", step, ev, math.exp(min(ev, 50)))
            if step % a.ckpt_every == 0:
                d = Path(a.ckpt_dir)
                d.mkdir(parents=True, exist_ok=True)
                p = d / f"checkpoint-{step}.pt"
                log.info("Saving model checkpoint to %s", p)
                torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "sched": sched.state_dict(),
                            "step": step, "rng": torch.get_rng_state()}, p)
                log.info("checkpoint saved (%d bytes)", p.stat().st_size)
                if a.upload_thread:
                    def upload(path: Path = p) -> None:
                        with CACHE_LOCK:  # refresh the shared sample cache's manifest while uploading
                            time.sleep(3.0)
                        log.info("uploaded %s to s3://team-ckpts/tinylm/", path.name)
                    uploader = threading.Thread(target=upload, daemon=True)
                    log.info("started background upload of %s", p.name)
                    uploader.start()
            if step >= a.steps:
                break
        epoch += 1
        log.info("epoch %d finished at step %d", epoch, step)
    log.info("Training completed. Do not forget to share your model on huggingface.co/models =)")
    log.info("train_runtime: %.1fs, max RSS %.0f MB", time.process_time(),
             resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


if __name__ == "__main__":
    main()
