"""Write token shards: npy (rows x 33) or packed (.bin uint16 + .idx int64 offsets), plus heldout.npy."""
import argparse
from pathlib import Path

import numpy as np


def chain(rng, n, seq, noise, branch, chain_seed):
    trans = np.random.default_rng(chain_seed).integers(0, 256, size=(256, branch))
    out = np.empty((n, seq), dtype=np.int64)
    cur = rng.integers(0, 256, size=n)
    for t in range(seq):
        out[:, t] = cur
        pick = rng.integers(0, branch, size=n)
        nz = rng.random(n) < noise
        cur = np.where(nz, rng.integers(0, 256, size=n), trans[cur, pick])
    return out

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True); ap.add_argument("--shards", type=int, default=4)
ap.add_argument("--rows", type=int, default=2000); ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--format", default="npy"); ap.add_argument("--noise", type=float, default=0.1)
ap.add_argument("--branch", type=int, default=4); ap.add_argument("--seq", type=int, default=33)
ap.add_argument("--only", type=int, default=-1, help="write only this shard index")
a = ap.parse_args()
d = Path(a.out); d.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(a.seed)
for i in range(a.shards):
    x = chain(rng, a.rows, a.seq, a.noise, a.branch, 7)
    if a.only >= 0 and i != a.only:
        continue
    stem = f"train-{i:05d}-of-{a.shards:05d}"
    if a.format == "npy":
        np.save(d / f"{stem}.npy", x)
    else:
        x.astype(np.uint16).tofile(d / f"{stem}.bin")
        np.arange(0, a.rows * a.seq + 1, a.seq, dtype=np.int64).tofile(d / f"{stem}.idx")
np.save(d / "heldout.npy", chain(rng, 256, 33, a.noise, a.branch, 7))
print("wrote", a.shards, "shards to", d)
