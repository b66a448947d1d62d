"""Single-process TinyLM training on CPU (token arrays in .npy files, or generated on the fly).

Knobs:
  --reserved K            the last K token ids are reserved (special tokens): masked out of the output
                          distribution in the loss
  --eval-file/--test-file evaluation split (every --eval-every steps) and the final test split
  --pair-buckets          hashed (previous, current) token-pair embedding (a model with a little context)
  --accum/--lr-scale      gradient accumulation; 'linear' scales the lr by the number of accumulated micro-batches
  --resume                resume from the newest checkpoint in --ckpt-dir (from scratch if it cannot be loaded)
  --shard-dir             stream .npy shards from a directory (IterableDataset, shards split over workers)
  --schedule linear       linear decay to 0 over the number of training steps
  --async-ckpt            write checkpoints from a background thread (training does not wait)
  --load-best             reload the checkpoint with the best eval_loss at the end, before the test eval
"""

from __future__ import annotations

import argparse
import copy
import faulthandler
import logging
import math
import os
import resource
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch
from common import SEQ, VOCAB, Bar, StepTimer, TinyLM, dump_config, markov_tokens, progress, setup_logging
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info


class ShardStream(IterableDataset):
    """Streams the rows of the .npy shards of a directory; worker w reads shards w, w+W, ..."""

    def __init__(self, shard_dir: str, batch: int) -> None:
        self.files = sorted(Path(shard_dir).glob("*.npy"))
        self.batch = batch

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        log = logging.getLogger("data.stream")
        for f in self.files[wid::nw]:
            log.info("worker %d: opening shard %s", wid, f.name)
            x = np.load(f)
            log.info("worker %d: shard %s: %d rows", wid, f.name, len(x))
            for i in range(0, len(x) - self.batch + 1, self.batch):
                yield torch.from_numpy(x[i:i + self.batch])


class TokenArray(Dataset):
    def __init__(self, x: np.ndarray) -> None:
        self.data = torch.from_numpy(x)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.data[i]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def token_nll(logits: torch.Tensor, targets: torch.Tensor, reserved: int) -> torch.Tensor:
    """Mean negative log-likelihood of the targets; reserved ids get no probability mass."""
    if reserved:
        logits = logits.masked_fill(torch.arange(VOCAB) >= VOCAB - reserved, float("-inf"))
        p = torch.softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return -torch.log(p).mean()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def evaluate(model: torch.nn.Module, x: torch.Tensor, reserved: int, bs: int = 512) -> float:
    model.eval()
    tot, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(x), bs):
            b = x[i:i + bs]
            tot += float(token_nll(model(b[:, :-1]), b[:, 1:], reserved)) * len(b)
            n += len(b)
    model.train()
    return tot / max(n, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-file", default="")
    ap.add_argument("--shard-dir", default="")
    ap.add_argument("--shard-rows", type=int, default=0, help="rows per shard (for the step count when streaming)")
    ap.add_argument("--eval-file", default="")
    ap.add_argument("--test-file", default="")
    ap.add_argument("--steps", type=int, default=0, help="0: run --epochs epochs")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--shuffle", action="store_true")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--optim", default="adamw", choices=["adamw", "sgd"])
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--schedule", default="cosine", choices=["cosine", "constant", "linear"])
    ap.add_argument("--clip", type=float, default=1.0, help="max grad norm (0: no clipping)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reserved", type=int, default=0)
    ap.add_argument("--pair-buckets", type=int, default=0)
    ap.add_argument("--d-model", type=int, default=48)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--lr-scale", default="none", choices=["none", "linear"])
    ap.add_argument("--eval-every", type=int, default=2000)
    ap.add_argument("--ckpt-every", type=int, default=5000)
    ap.add_argument("--ckpt-dir", default="checkpoints")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--async-ckpt", action="store_true")
    ap.add_argument("--load-best", action="store_true")
    ap.add_argument("--debug-grads", action="store_true", help="log every parameter's grad norm each step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tqdm", action="store_true", help="a tqdm bar on stderr besides the log lines")
    a = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    log = setup_logging(None)

    def on_term(signum, frame):
        log.warning("Received SIGTERM (signal %d): stopping now, last checkpoint is the newest in %s", signum, a.ckpt_dir)
        sys.stdout.flush()
        faulthandler.dump_traceback(all_threads=True)
        sys.stderr.flush()
        os._exit(143)

    signal.signal(signal.SIGTERM, on_term)
    if a.shard_dir:
        train_x = None
    else:
        train_x = np.load(a.train_file) if a.train_file else markov_tokens(np.random.default_rng(a.seed), 50000)
    eval_x = np.load(a.eval_file) if a.eval_file else markov_tokens(np.random.default_rng(a.seed), 52048)[-2048:]
    eval_x = torch.from_numpy(eval_x[:2048])
    if a.shard_dir:
        stream = ShardStream(a.shard_dir, a.batch * a.accum)
        loader = DataLoader(stream, batch_size=None, num_workers=a.workers)
        steps_per_epoch = len(stream.files) * (a.shard_rows // (a.batch * a.accum))
        n_train = len(stream.files) * a.shard_rows
    else:
        loader = DataLoader(TokenArray(train_x), batch_size=a.batch * a.accum, shuffle=a.shuffle,
                            num_workers=a.workers, drop_last=True)
        steps_per_epoch = len(loader)
        n_train = len(train_x)
    total = a.steps or steps_per_epoch * a.epochs
    sched_steps = steps_per_epoch // a.accum if a.schedule == "linear" else total
    lr = a.lr * a.accum if a.lr_scale == "linear" else a.lr
    cfg = {"model": {"name": "tinylm", "d_model": a.d_model, "vocab": VOCAB, "seq_len": SEQ,
                     "pair_buckets": a.pair_buckets, "reserved_tokens": a.reserved},
           "optim": {"name": a.optim, "lr": a.lr, "lr_scaling": a.lr_scale, "weight_decay": 0.01,
                     "clip_grad_norm": a.clip, "scheduler": {"name": a.schedule, "warmup_steps": a.warmup,
                                                                "num_training_steps": sched_steps}},
           "data": {"train_file": a.train_file or a.shard_dir or "<generated>", "eval_file": a.eval_file or "<generated>",
                    "test_file": a.test_file or None, "train_size": n_train, "shuffle": a.shuffle,
                    "micro_batch_size": a.batch, "gradient_accumulation_steps": a.accum,
                    "num_workers": a.workers},
           "train": {"max_steps": total, "epochs": a.epochs if not a.steps else None, "eval_every": a.eval_every,
                     "ckpt_every": a.ckpt_every, "ckpt_dir": a.ckpt_dir, "async_checkpointing": a.async_ckpt,
                     "load_best_model_at_end": a.load_best, "resume": a.resume, "precision": "32-true"}}
    dump_config(log, cfg)
    log.info("train batches per epoch: %d (global batch %d = %d x %d accumulation), eval samples %d",
             steps_per_epoch, a.batch * a.accum, a.batch, a.accum, len(eval_x))
    if a.lr_scale == "linear":
        log.info("linear lr scaling: lr %.2e x %d accumulation steps = %.2e", a.lr, a.accum, lr)
    model = TinyLM(d=a.d_model, pair_buckets=a.pair_buckets)
    if a.optim == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=0.01)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)

    def lr_lambda(s: int) -> float:
        w = min(1.0, (s + 1) / a.warmup)
        if a.schedule == "constant":
            return w
        if a.schedule == "linear":
            return w * max(0.0, 1.0 - s / sched_steps)
        return w * 0.5 * (1 + math.cos(math.pi * min(s, total) / total))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    log.info("model parameters: %d", sum(p.numel() for p in model.parameters()))
    step, epoch, skip = 0, 0, 0
    if a.resume:
        ckpts = sorted(Path(a.ckpt_dir).glob("checkpoint-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
        if ckpts:
            log.info("Resuming from checkpoint %s", ckpts[-1])
            try:
                st = torch.load(ckpts[-1])
                model.load_state_dict(st["model"])
                opt.load_state_dict(st["optim"])
                sched.load_state_dict(st["sched"])
                step, epoch = st["step"], st["epoch"]
                skip = step - epoch * steps_per_epoch
                torch.set_rng_state(st["rng"])
                log.info("  Continuing training from global step %d (epoch %d); skipping the first %d batches of epoch %d",
                         step, epoch, skip, epoch)
            except Exception as e:  # noqa: BLE001 - the trainer logs any restore failure and trains from scratch (the fault)
                log.warning("could not restore the training state from %s (%s: %s); training from scratch",
                            ckpts[-1], type(e).__name__, e)
        else:
            log.info("no checkpoint found in %s, starting from scratch", a.ckpt_dir)
    bar = Bar(total, "train", every=5) if a.tqdm else None
    if bar is not None:
        bar.n = step
    glog = logging.getLogger("trainer.grads")
    if a.debug_grads:
        logging.getLogger().setLevel(logging.DEBUG)
    running = 0.0
    timer = StepTimer()
    best, best_step, best_path, writer = float("inf"), -1, None, None

    def write_ckpt(state: dict, p: Path) -> None:
        torch.save(state, p)
        log.info("checkpoint saved to %s (%d bytes)", p, p.stat().st_size)
    while step < total:
        for bi, big in enumerate(loader):
            if bi < skip:
                continue
            skip = 0
            opt.zero_grad(set_to_none=True)
            loss_sum = 0.0
            for mi, micro in enumerate(big.chunk(a.accum)):
                loss = token_nll(model(micro[:, :-1]), micro[:, 1:], a.reserved)
                loss.backward()
                loss_sum += float(loss)
                if a.debug_grads and a.accum > 1:
                    glog.debug("step %d micro_step %d/%d loss %.4f", step + 1, mi + 1, a.accum, float(loss))
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip if a.clip > 0 else float("inf"))
            opt.step()
            sched.step()
            step += 1
            lval = loss_sum / a.accum
            running += lval
            if a.debug_grads:
                for name, p in model.named_parameters():
                    glog.debug("step %d grad_norm/%s %.6f param_norm %.4f", step, name,
                               float(p.grad.norm()) if p.grad is not None else 0.0, float(p.detach().norm()))
            ms = timer.lap()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{lval:.3f}", lr=f"{sched.get_last_lr()[0]:.2e}")
            extra = f" | mem {rss_mb():.0f}MB" if step % 10 == 0 else ""
            progress(log, step, total, epoch, lval, sched.get_last_lr()[0], float(gn),
                     a.batch * a.accum * SEQ * 1000 / ms, ms, extra)
            if step % 200 == 0:
                log.info("avg loss over last 200 steps: %.4f", running / 200)
                running = 0.0
            if step % a.eval_every == 0:
                ev = evaluate(model, eval_x, a.reserved)
                log.info("***** eval @ step %d ***** eval_loss = %.4f | eval_ppl = %.3f", step, ev, math.exp(min(ev, 50)))
                if ev < best:
                    best, best_step = ev, step
                    log.info("new best eval_loss %.4f at step %d", ev, step)
            if step % a.ckpt_every == 0:
                d = Path(a.ckpt_dir)
                d.mkdir(parents=True, exist_ok=True)
                p = d / f"checkpoint-{step}.pt"
                log.info("Saving model checkpoint to %s", p)
                state = {"model": model.state_dict(), "optim": opt.state_dict(), "sched": sched.state_dict(),
                         "step": step, "epoch": epoch, "rng": torch.get_rng_state()}
                if best_path is None or (a.eval_every and best_step == step):
                    best_path = p
                if a.async_ckpt:
                    if writer is not None:
                        writer.join()
                    state = copy.deepcopy(state)
                    writer = threading.Thread(target=write_ckpt, args=(state, p), name=f"ckpt-writer-{step}")
                    writer.start()
                else:
                    write_ckpt(state, p)
            if step >= total:
                break
        else:
            epoch += 1
            log.info("epoch %d finished at step %d", epoch, step)
            continue
        break
    if writer is not None:
        writer.join()
    if a.load_best and best_path is not None:
        log.info("Loading best model from %s (eval_loss %.4f)", best_path, best)
        model.load_state_dict(torch.load(best_path)["model"])
    ev = evaluate(model, eval_x, a.reserved)
    log.info("final eval_loss = %.4f | eval_ppl = %.3f", ev, math.exp(min(ev, 50)))
    if a.test_file:
        test_x = torch.from_numpy(np.load(a.test_file))
        te = evaluate(model, test_x, a.reserved)
        log.info("***** test results ***** test_loss = %.4f | test_ppl = %.3f (%d samples)", te,
                 math.exp(min(te, 50)), len(test_x))
    p = Path(a.ckpt_dir) / "model_final.pt"
    p.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), p)
    log.info("Saved final model to %s", p)
    log.info("Training completed. Do not forget to share your model on huggingface.co/models =)")
    log.info("train_runtime: %.1fs, max RSS %.0f MB", time.process_time(),
             resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


if __name__ == "__main__":
    main()
