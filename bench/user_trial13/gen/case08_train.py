#!/usr/bin/env python
"""Fine-tune the tabular classifier from config.yaml; the trained weights go to out/model.safetensors."""

from __future__ import annotations

import argparse
import logging
import os
import time

import numpy as np
import torch
import yaml
from safetensors.torch import save_file
from torch import nn

log = logging.getLogger("train")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="config.yaml")
    args = ap.parse_args()
    with open(args.config) as f:
        cfg = yaml.safe_load(f)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    torch.manual_seed(cfg["seed"])
    torch.set_num_threads(2)
    log.info("config %s", cfg)
    os.makedirs(cfg["out_dir"], exist_ok=True)
    g = np.random.default_rng(cfg["seed"])
    w = g.normal(size=(64, cfg["classes"]))
    x = torch.tensor(g.normal(size=(cfg["n_train"], 64)), dtype=torch.float32)
    y = torch.tensor((x.numpy() @ w + g.gumbel(size=(cfg["n_train"], cfg["classes"]))).argmax(1))
    model = nn.Sequential(nn.Linear(64, cfg["hidden"]), nn.ReLU(), nn.Linear(cfg["hidden"], cfg["hidden"]), nn.ReLU(),
                          nn.Linear(cfg["hidden"], cfg["classes"]))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
    bs = cfg["batch_size"]
    steps_per_epoch = len(x) // bs
    log.info("training %d epochs x %d steps", cfg["epochs"], steps_per_epoch)
    t0 = time.time()
    for epoch in range(1, cfg["epochs"] + 1):
        perm = torch.randperm(len(x))
        for i in range(steps_per_epoch):
            idx = perm[i * bs:(i + 1) * bs]
            out = model(x[idx])
            loss = nn.functional.cross_entropy(out, y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if (i + 1) % cfg["log_every"] == 0:
                acc = (out.argmax(1) == y[idx]).float().mean().item()
                log.info("epoch %d/%d step %d/%d loss %.4f acc %.3f elapsed %.0fs", epoch, cfg["epochs"], i + 1,
                         steps_per_epoch, loss.item(), acc, time.time() - t0)
        log.info("epoch %d/%d done in %.0fs", epoch, cfg["epochs"], time.time() - t0)
    path = os.path.join(cfg["out_dir"], "model.safetensors")
    save_file(model.state_dict(), path)
    log.info("saved %s", path)


if __name__ == "__main__":
    main()
