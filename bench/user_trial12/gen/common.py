"""Shared pieces of the training scripts: a tiny LM, token data, logging.

Every script here really trains (real PyTorch on CPU) and prints what a typical research
training loop prints: a config dump, one progress line per step, periodic eval and checkpoint
lines, and whatever warnings the libraries really emit.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import socket
import sys
import time

import numpy as np
import torch
from torch import nn

VOCAB = 256
SEQ = 32


class TinyLM(nn.Module):
    """Embedding -> 2 MLP blocks -> logits: a few thousand parameters, fast on one CPU core."""

    def __init__(self, d: int = 48, vocab: int = VOCAB, pair_buckets: int = 0) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        # optional hashed (previous, current) token-pair embedding: a little context
        self.pair = nn.Embedding(pair_buckets, d) if pair_buckets else None
        self.block1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.block2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        if self.pair is not None:
            prev = torch.cat([torch.zeros_like(tokens[:, :1]), tokens[:, :-1]], 1)
            h = h + self.pair((prev * 1315423911 + tokens * 2654435761) % self.pair.num_embeddings)
        h = h + self.block1(h)
        h = h + self.block2(h)
        return self.head(h)


def markov_tokens(rng: np.random.Generator, n: int, seq: int = SEQ + 1, vocab: int = VOCAB) -> np.ndarray:
    """Sequences from a sparse random Markov chain, so the loss really falls while training."""
    trans = rng.integers(0, vocab, size=(vocab, 4))
    out = np.empty((n, seq), dtype=np.int64)
    cur = rng.integers(0, vocab, size=n)
    for t in range(seq):
        out[:, t] = cur
        pick = rng.integers(0, 4, size=n)
        noise = rng.random(n) < 0.1
        cur = np.where(noise, rng.integers(0, vocab, size=n), trans[cur, pick])
    return out


def markov2_tokens(rng: np.random.Generator, n: int, seq: int = SEQ + 1, chain_seed: int = 7) -> np.ndarray:
    """Second-order chain: the next token depends on the (previous, current) pair."""
    trans = np.random.default_rng(chain_seed).integers(0, VOCAB, size=(VOCAB, VOCAB, 2))
    out = np.empty((n, seq), dtype=np.int64)
    prev = rng.integers(0, VOCAB, size=n)
    cur = rng.integers(0, VOCAB, size=n)
    for t in range(seq):
        out[:, t] = cur
        pick = rng.integers(0, 2, size=n)
        noise = rng.random(n) < 0.05
        nxt = np.where(noise, rng.integers(0, VOCAB, size=n), trans[prev, cur, pick])
        prev, cur = cur, nxt
    return out


def setup_logging(rank: int | None = None, name: str = "trainer") -> logging.Logger:
    tag = f" [rank{rank}]" if rank is not None else ""
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s %(levelname)s %(name)s{tag}: %(message)s",
        stream=sys.stdout,
        force=True,
    )
    logging.captureWarnings(True)
    return logging.getLogger(name)


def dump_config(log: logging.Logger, cfg: dict) -> None:
    log.info("***** Running training *****")
    log.info("host=%s python=%s torch=%s platform=%s", socket.gethostname(), platform.python_version(),
             torch.__version__, platform.platform())
    log.info("num threads: %d, pid %d, cwd %s", torch.get_num_threads(), os.getpid(), os.getcwd())
    for line in json.dumps(cfg, indent=2, sort_keys=True).splitlines():
        log.info("config | %s", line)


def progress(log: logging.Logger, step: int, total: int, epoch: int, loss: float, lr: float,
             gnorm: float, tokens_per_s: float, step_ms: float, extra: str = "") -> None:
    log.info("step %d/%d | epoch %d | loss %.4f | lr %.3e | grad_norm %.4f | tok/s %.0f | %.2f ms/step%s",
             step, total, epoch, loss, lr, gnorm, tokens_per_s, step_ms, extra)


class StepTimer:
    def __init__(self) -> None:
        self.t = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        dt, self.t = now - self.t, now
        return dt * 1000.0


def lm_loss(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    logits = model(batch[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))


class Bar:
    """A tqdm-style bar on stderr ('\\r' updates), as tqdm writes it when stderr is a file."""

    def __init__(self, total: int, desc: str = "train", every: int = 1) -> None:
        self.total, self.desc, self.every, self.n = total, desc, every, 0
        self.t0 = time.time()
        self.postfix = ""

    def set_postfix(self, **kw: str) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in kw.items())

    def update(self, k: int = 1) -> None:
        self.n += k
        if self.n % self.every and self.n != self.total:
            return
        el = time.time() - self.t0
        rate = self.n / el if el > 0 else 0.0
        left = (self.total - self.n) / rate if rate else 0.0
        frac = self.n / self.total
        full = int(frac * 10)
        bar = "\u2588" * full + ("\u258c" if frac * 10 - full >= 0.5 else " ") + " " * (9 - full)
        fmt = lambda s: f"{int(s) // 60:02d}:{int(s) % 60:02d}"
        sys.stderr.write(f"\r{self.desc}: {frac:4.0%}|{bar[:10]}| {self.n}/{self.total} "
                         f"[{fmt(el)}<{fmt(left)}, {rate:.2f}it/s, {self.postfix}]")
        sys.stderr.flush()
