"""The shard-zero story: the trainer starts while data preparation is still writing shards.

Run without --prepare it is the pipeline: it starts the data-preparation job (this script with
--prepare) and then, not waiting for it (two steps of a pipeline with no dependency between
them), the trainer. Preparation writes the validation file first, then training shards one by
one, each taking a while. The trainer globs the shards once at start-up, finds only shard 0,
and trains on it for many epochs, logging train and validation loss per epoch: train loss falls
towards zero while validation loss climbs (memorisation). Nothing fails; the model is useless.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import subprocess
import sys
import time

N_SHARDS = 8
PER_SHARD = 48
FEATURES = 32
EPOCHS = 25


def make(seed: int, n: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    w = torch.Generator().manual_seed(1234)  # one true rule shared by every split
    true_w = torch.randn(FEATURES, generator=w)
    x = torch.randn(n, FEATURES, generator=g)
    y = (x @ true_w > 0).long()
    flip = torch.rand(n, generator=g) < 0.2  # label noise, as real labels have
    return x, torch.where(flip, 1 - y, y)


def prepare(out: str, delay: float) -> None:
    import torch

    os.makedirs(out, exist_ok=True)
    torch.save(make(999, 512), os.path.join(out, "val.pt"))
    for i in range(N_SHARDS):
        tmp = os.path.join(out, f".shard-{i:05d}.pt.tmp")
        torch.save(make(i, PER_SHARD), tmp)
        os.replace(tmp, os.path.join(out, f"shard-{i:05d}.pt"))
        print(f"wrote shard {i + 1}/{N_SHARDS}", flush=True)
        time.sleep(delay)
    print("data preparation done", flush=True)


def train(data: str, passes: int, log_steps: bool) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    log = logging.getLogger("train")
    while not os.path.exists(os.path.join(data, "val.pt")) or not glob.glob(os.path.join(data, "shard-*.pt")):
        time.sleep(0.05)  # waits for the data directory to exist - but not for it to be complete
    shards = sorted(glob.glob(os.path.join(data, "shard-*.pt")))
    # torch only now: both jobs import it at once, and on a loaded machine the trainer's import could
    # end seconds after preparation's, by when it would find more shards than the story's one
    import torch

    parts = [torch.load(s) for s in shards]
    x = torch.cat([p[0] for p in parts])
    y = torch.cat([p[1] for p in parts])
    vx, vy = torch.load(os.path.join(data, "val.pt"))
    log.info("loaded %d training samples from %d file(s), %d validation samples", len(x), len(shards), len(vx))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 256), torch.nn.ReLU(), torch.nn.Linear(256, 2))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    step, started = 0, time.monotonic()
    for epoch in range(1, EPOCHS + 1):
        model.train()
        for _ in range(passes):  # a long run: the same shard again and again, as a day on one shard is
            for i in range(0, len(x), 16):
                loss = torch.nn.functional.cross_entropy(model(x[i : i + 16]), y[i : i + 16])
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                if log_steps:
                    log.info("epoch %d step %d train_loss %.4f lr %.1e samples/s %.1f", epoch, step, loss.item(), 3e-3,
                             step * 16 / max(time.monotonic() - started, 1e-6))
        model.eval()
        with torch.no_grad():
            train_loss = torch.nn.functional.cross_entropy(model(x), y).item()
            out = model(vx)
            val_loss = torch.nn.functional.cross_entropy(out, vy).item()
            val_acc = (out.argmax(1) == vy).float().mean().item()
        log.info("epoch %d train_loss %.4f val_loss %.4f val_acc %.4f", epoch, train_loss, val_loss, val_acc)
    torch.save(model.state_dict(), "model.pt")
    log.info("training finished: saved model.pt")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prepare", action="store_true")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--data", default="data")
    ap.add_argument("--delay", type=float, default=1.0, help="seconds each shard takes to prepare")
    ap.add_argument("--passes", type=int, default=1, help="passes over the training data per epoch")
    ap.add_argument("--log-steps", action="store_true", help="a line per training step (a long log)")
    a = ap.parse_args()
    if a.prepare:
        prepare(a.data, a.delay)
        return 0
    if a.train:
        train(a.data, a.passes, a.log_steps)
        return 0
    with open("prepare.log", "wb") as plog:
        prep = subprocess.Popen([sys.executable, "-u", __file__, "--prepare", "--data", a.data, "--delay", str(a.delay)],
                                stdout=plog, stderr=subprocess.STDOUT)
    rc = subprocess.call([sys.executable, "-u", __file__, "--train", "--data", a.data, "--passes", str(a.passes)]
                         + (["--log-steps"] if a.log_steps else []))
    prep.wait()
    return rc


if __name__ == "__main__":
    sys.exit(main())
