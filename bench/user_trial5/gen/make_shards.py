"""Write JSONL token shards for the distributed runs (data, not a log).

--corrupt RANK:SHARD:RECORD truncates one record in the SHARD-th shard read by RANK (as an
interrupted preprocessing write leaves it); --blocked RANK:SHARD makes that shard path a FIFO
with no writer, so opening it blocks forever, as a read from a wedged network mount does.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
from common import markov_tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--shards-per-rank", type=int, default=8)
    ap.add_argument("--records", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corrupt", default="")
    ap.add_argument("--blocked", default="")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    n = a.world * a.shards_per_rank
    corrupt = tuple(int(x) for x in a.corrupt.split(":")) if a.corrupt else None
    blocked = tuple(int(x) for x in a.blocked.split(":")) if a.blocked else None
    for s in range(n):
        rank, k = s % a.world, s // a.world
        path = out / f"train-{s:05d}-of-{n:05d}.jsonl"
        if blocked and (rank, k) == blocked:
            os.mkfifo(path)
            continue
        toks = markov_tokens(rng, a.records)
        with open(path, "w") as f:
            for i, row in enumerate(toks):
                line = json.dumps({"id": f"{s:05d}-{i:06d}", "tokens": row.tolist()})
                if corrupt and (rank, k, i) == corrupt:
                    line = line[: len(line) // 2]
                f.write(line + "\n")
    print(f"wrote {n} shards to {out}")


if __name__ == "__main__":
    main()
