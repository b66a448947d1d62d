#!/usr/bin/env python
"""Train the topic classifier (bag-of-tokens MLP) from config.yaml.

Resumes from ckpt/last.safetensors when present; uses exact features over the vocabulary when they
fit in memory, hashed buckets otherwise; writes ckpt/final.safetensors and metrics.json at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
import warnings

import numpy as np
import torch
import yaml
from safetensors.torch import load_file, save_file
from torch import nn

log = logging.getLogger("train")


def make_split(n: int, seed: int, vocab: int, classes: int):
    """Token-count documents: each class draws tokens from its own topic over `vocab` tokens."""
    g = np.random.default_rng(seed)
    topics = np.random.default_rng(77).integers(0, vocab, size=(classes, 300))  # each class's topical tokens
    y = g.integers(0, classes, size=n)
    rare = (y == classes - 1) & (g.random(n) < 0.85)  # the last class is rare, as in the real data
    y[rare] = g.integers(0, classes - 1, size=int(rare.sum()))
    topical = topics[y[:, None], g.integers(0, 300, size=(n, 40))]
    background = g.integers(0, vocab, size=(n, 40))
    docs = np.where(g.random((n, 40)) < 0.3, topical, background)
    return list(docs), torch.tensor(y)


def featurize(docs: list, buckets: int, seed: int = 0) -> torch.Tensor:
    """Hashed bag-of-tokens counts, log1p-scaled, as one dense (n_docs, buckets) tensor."""
    feats = torch.zeros(len(docs), buckets)
    for i, d in enumerate(docs):
        h = (np.asarray(d, dtype=np.int64) * 2654435761 + seed) % buckets
        feats[i].index_add_(0, torch.from_numpy(h), torch.ones(len(h)))
    return feats.log1p_()


def macro_f1(pred: np.ndarray, true: np.ndarray, classes: int) -> float:
    tp = np.array([((pred == c) & (true == c)).sum() for c in range(classes)], dtype=np.float64)
    fp = np.array([((pred == c) & (true != c)).sum() for c in range(classes)], dtype=np.float64)
    fn = np.array([((pred != c) & (true == c)).sum() for c in range(classes)], dtype=np.float64)
    precision = tp / (tp + fp)
    recall = tp / (tp + fn)
    return float(np.mean(2 * precision * recall / (precision + recall)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="config.yaml")
    args = ap.parse_args()
    with open(args.config) as f:
        cfg = yaml.safe_load(f)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    warnings.simplefilter("default")
    torch.manual_seed(cfg["seed"])
    torch.set_num_threads(2)
    log.info("config: %s", json.dumps(cfg))

    dt, yt = make_split(cfg["n_train"], 1, cfg["vocab"], cfg["classes"])
    dv, yv = make_split(cfg["n_val"], 2, cfg["vocab"], cfg["classes"])
    buckets = cfg["feature_buckets"]
    try:  # exact features: one column per vocabulary entry
        xt = featurize(dt, cfg["vocab"])
        xv = featurize(dv, cfg["vocab"])
        buckets = cfg["vocab"]
    except RuntimeError as e:
        log.warning("dense features over the full vocabulary (%d) do not fit: %s; falling back to %d hashed buckets",
                    cfg["vocab"], str(e).strip().splitlines()[0], buckets)
        xt = featurize(dt, buckets)
        xv = featurize(dv, buckets)
    log.info("features: %s train, %s val", tuple(xt.shape), tuple(xv.shape))
    model = nn.Sequential(nn.Linear(buckets, cfg["hidden"]), nn.ReLU(), nn.Dropout(0.1),
                          nn.Linear(cfg["hidden"], cfg["classes"]))
    os.makedirs(cfg["ckpt_dir"], exist_ok=True)
    last = os.path.join(cfg["ckpt_dir"], "last.safetensors")
    try:
        model.load_state_dict(load_file(last))
        log.info("resumed from %s", last)
    except FileNotFoundError:
        log.warning("could not resume from %s, starting from scratch", last, exc_info=True)

    bs = cfg["batch_size"]
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    steps_per_epoch = (len(xt) + bs - 1) // bs
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg["lr"], total_steps=steps_per_epoch * cfg["epochs"])
    sched.step()  # start the warmup at step 1
    t0 = time.time()
    step = 0
    best = 0.0
    for epoch in range(1, cfg["epochs"] + 1):
        model.train()
        perm = torch.randperm(len(xt))
        tot = 0.0
        for i in range(0, len(xt), bs):
            idx = perm[i:i + bs]
            loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step + 2 < steps_per_epoch * cfg["epochs"]:
                sched.step()
            step += 1
            tot += loss.item() * len(idx)
            if step % cfg["log_every"] == 0:
                log.info("epoch %d step %d loss %.4f lr %.2e", epoch, step, loss.item(), sched.get_last_lr()[0])
        model.eval()
        with torch.no_grad():
            logits = model(xv)
            vloss = nn.functional.cross_entropy(logits, yv).item()
            pred = logits.argmax(1).numpy()
        acc = float((pred == yv.numpy()).mean())
        f1 = macro_f1(pred, yv.numpy(), cfg["classes"])
        best = max(best, acc)
        log.info("epoch %d: train_loss %.4f val_loss %.4f val_acc %.4f val_macro_f1 %.4f", epoch, tot / len(xt),
                 vloss, acc, f1)
        save_file(model.state_dict(), last)
    final = os.path.join(cfg["ckpt_dir"], "final.safetensors")
    save_file(model.state_dict(), final)
    metrics = {"val_loss": vloss, "val_acc": acc, "val_macro_f1": f1, "best_val_acc": best, "epochs": cfg["epochs"],
               "steps": step, "batch_size": bs, "wall_time_s": round(time.time() - t0, 1)}
    with open("metrics.json", "w") as f:
        json.dump(metrics, f, indent=2)
    log.info("training complete: %d steps, val_acc %.4f, saved %s", step, acc, final)


if __name__ == "__main__":
    main()
