"""Write the token data the training scripts read (numpy shards, one .npz file per sample, or one array)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from common import SEQ, markov2_tokens, markov_tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["shards", "files", "array"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", type=int, default=6000, help="rows per shard / files / rows of the array")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--order2", action="store_true")
    ap.add_argument("--short", default="", help="SHARD:COUNT short documents (padded with -1)")
    ap.add_argument("--noise", default="", help="SHARD:ROW:COUNT rows of uniform random tokens")
    ap.add_argument("--truncate", type=int, default=-1, help="file index written truncated (partial copy)")
    ap.add_argument("--eval-out", default="", help="also write --eval-rows more rows of the same source here")
    ap.add_argument("--eval-rows", type=int, default=2048)
    ap.add_argument("--token-at", default="", help="ROW:POS:TOKEN put one token into the array")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    out = Path(a.out)
    gen = markov2_tokens if a.order2 else (lambda r, n: markov_tokens(r, n, vocab=a.vocab))
    if a.kind == "shards":
        out.mkdir(parents=True, exist_ok=True)
        for s in range(a.shards):
            x = gen(np.random.default_rng([a.seed, s]), a.rows)
            if a.short and int(a.short.split(":")[0]) == s:
                k = int(a.short.split(":")[1])
                rows = rng.choice(a.rows, k, replace=False)
                for r in rows:
                    x[r, rng.integers(4, SEQ):] = -1
            if a.noise and int(a.noise.split(":")[0]) == s:
                _, r0, k = (int(v) for v in a.noise.split(":"))
                x[r0:r0 + k] = rng.integers(0, 256, size=(k, x.shape[1]))
            np.save(out / f"train-{s:05d}-of-{a.shards:05d}.npy", x)
    elif a.kind == "files":
        out.mkdir(parents=True, exist_ok=True)
        x = gen(rng, a.rows)
        for i in range(a.rows):
            p = out / f"{i:07d}.npz"
            np.savez_compressed(p, tokens=x[i], length=np.int64(x.shape[1]))
            if i == a.truncate:  # a partial copy (an interrupted sync)
                b = p.read_bytes()
                p.write_bytes(b[: len(b) // 2])
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        x = gen(rng, a.rows + (a.eval_rows if a.eval_out else 0))
        if a.eval_out:
            np.save(a.eval_out, x[a.rows:])
            x = x[:a.rows]
        if a.token_at:
            r, pos, tok = (int(v) for v in a.token_at.split(":"))
            x[r, pos] = tok
        np.save(out, x)
    print(f"wrote {a.kind} to {out}")


if __name__ == "__main__":
    main()
