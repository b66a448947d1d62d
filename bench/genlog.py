"""Generate a realistic training log of any size, with planted events whose positions are known.

The log mixes the formats the engine reads (HF Trainer dicts, Lightning/tqdm bars with carriage
returns, key=value lines, DeepSpeed and Megatron iteration lines, JSON lines), interleaves 8
ranks with `[rankN]:` prefixes, sprinkles harmless warnings, and plants failures early, in the
middle and at the end. The failure text is never invented: it is copied verbatim from the real
logs of tests/corpus (each with its public source in case.json). The metric events are planted
at known lines so a test can check the scan finds them exactly: a grad-norm spike written as a
plain decimal (no catalog signature matches it), the first NaN loss, and the last progress line.

    python bench/genlog.py /tmp/train.log --size 1G     # prints the planted truth as JSON
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"
RANKS = 8
SIZES = {"K": 2**10, "M": 2**20, "G": 2**30}

# Harmless lines real runs print (warnings that are not failures), verbatim wording.
WARNINGS = [
    ("/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: "
    "the use_reentrant parameter should be passed explicitly. In version 2.4 we will raise an exception if "
    "use_reentrant is not passed. use_reentrant=False is recommended, but if you need to preserve the current "
    "default behavior, you can pass use_reentrant=True. Refer to docs for more details on the differences "
    "between the two variants."),
    "  warnings.warn(",
    ("[rank{r}]:[W reducer.cpp:1360] Warning: find_unused_parameters=True was specified in DDP constructor, but did "
    "not find any unused parameters in the forward pass. This flag results in an extra traversal of the autograd "
    "graph every iteration,  which can adversely affect performance."),
    ("huggingface/tokenizers: The current process just got forked, after parallelism has already been used. "
    "Disabling parallelism to avoid deadlocks..."),
]


def parse_size(text: str) -> int:
    """'1G', '50M', '10K' or a byte count."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    if t and t[-1] in SIZES:
        return int(float(t[:-1]) * SIZES[t[-1]])
    return int(t)


def corpus_block(case: str, first: int = 0, last: int | None = None) -> list[str]:
    """Lines of a real failure log from tests/corpus, verbatim (a contiguous slice)."""
    folder = next(CORPUS.glob(f"{case}-*"))
    lines = (folder / "train.log").read_text("utf-8").splitlines()
    return lines[first:last]


class _Writer:
    def __init__(self, f):
        self.f, self.line, self.bytes, self.buf = f, 0, 0, []

    def add(self, text: str) -> int:
        """Append one line (without its newline); return its 1-based line number."""
        self.buf.append(text)
        self.line += 1
        self.bytes += len(text.encode()) + 1 if not text.isascii() else len(text) + 1
        if len(self.buf) >= 4096:
            self.flush()
        return self.line

    def flush(self) -> None:
        if self.buf:
            self.f.write(("\n".join(self.buf) + "\n").encode())
            self.buf = []


def generate(path: str | Path, size: int, seed: int = 0) -> dict:
    """Write about `size` bytes to `path`; return the planted truth (line numbers, steps, values)."""
    rng = random.Random(seed)
    truth: dict = {"size": 0, "lines": 0, "failures": {}}
    spike_at, nan_at, mid_at, early_at = int(size * 0.30), int(size * 0.80), int(size * 0.50), int(size * 0.05)
    with open(path, "wb") as f:
        w = _Writer(f)
        w.add("[2026-11-29 09:00:00,001] torch.distributed.run: [WARNING] *****************************************")
        w.add("[2026-11-29 09:00:00,001] torch.distributed.run: [WARNING] Setting OMP_NUM_THREADS environment variable "
              "for each process to be 1 in default, to avoid your system being overloaded, please further tune the "
              "variable for optimal performance in your application as needed.")
        for r in range(RANKS):
            w.add(f"[rank{r}]: [2026-11-29 09:00:0{r},500] [INFO] [comm.py:637:init_distributed] cdb=None")
        w.add("***** Running training *****")
        w.add("  Num examples = 12,800,000")
        step, loss = 0, 6.0
        planted = {"spike": False, "nan": False, "early": False, "mid": False}
        while w.bytes < size - 4096:
            step += 1
            style = (step // 400) % 5
            loss = max(0.8, loss * 0.99995 + rng.gauss(0, 0.01))
            gn = abs(rng.gauss(1.0, 0.15))
            lr = 3e-4 * min(1.0, step / 2000)
            ts = f"2026-11-29 {9 + step // 36000 % 14:02d}:{step // 600 % 60:02d}:{step // 10 % 60:02d}"
            if not planted["spike"] and w.bytes >= spike_at:
                planted["spike"], gn, style = True, 31622.7766, 0  # a plain decimal: no signature matches it
            nan_now = not planted["nan"] and w.bytes >= nan_at
            if nan_now:
                planted["nan"], style = True, 0
            ls = "nan" if nan_now else f"{loss:.4f}"
            if style == 0:  # HF Trainer, one dict per logging step
                no = w.add(f"{{'loss': {ls}, 'grad_norm': {gn!r}, 'learning_rate': {lr!r}, 'epoch': {step / 40000:.2f}}}")
            elif style == 1:  # Lightning bar: tqdm frames separated by \r, a newline every few frames
                frames = [f"Epoch {step // 40000}: {step % 1000 // 10:3d}%|{'█' * (step % 1000 // 100):<10}| "
                          f"{step % 1000 + i}/1000 [{step // 60 % 60:02d}:{step % 60:02d}<02:45,  3.33it/s, "
                          f"v_num=0, train_loss={loss - i * 1e-4:.3f}, grad_norm={gn:.3f}]" for i in range(8)]
                no = w.add("\r".join(frames))
            elif style == 2:  # key=value from every rank, interleaved
                for r in range(RANKS):
                    no = w.add(f"[rank{r}]: {ts} | INFO | step={step} loss={loss + r * 1e-3:.4f} grad_norm={gn:.4f} "
                               f"lr={lr:.3e} tokens/s={51234 + rng.randrange(999)}")
            elif style == 3:  # DeepSpeed then Megatron iteration lines
                w.add(f"[{ts},123] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped=0, lr=[{lr!r}], mom=[(0.9, 0.95)]")
                no = w.add(f" iteration {step:8d}/  500000 | consumed samples: {step * 128:12d} | elapsed time per "
                           f"iteration (ms): {812 + rng.random() * 20:.1f} | learning rate: {lr:.3E} | global batch size: "
                           f"  128 | lm loss: {loss:.6E} | loss scale: 65536.0 | grad norm: {gn:.3f} | number of "
                           "skipped iterations:   0 | number of nan iterations:   0 |")
            else:  # JSON lines
                no = w.add(json.dumps({"step": step, "loss": round(loss, 4), "grad_norm": round(gn, 4), "lr": lr,
                                       "tokens_per_sec": 51234.5, "time": ts}))
            if gn > 1000 and "spike" not in truth:
                truth["spike"] = {"line": no, "grad_norm": gn, "step": step}
            if nan_now:
                truth["first_nan"] = {"line": no, "step": step}
            truth["last_progress"] = {"line": no, "step": step}
            if step % 997 == 0:
                for text in WARNINGS:
                    w.add(text.format(r=step % RANKS))
            if not planted["early"] and w.bytes >= early_at:  # a CUDA OOM on one rank, then a resumed run
                planted["early"] = True
                truth["failures"]["early-cuda-oom"] = w.add("Traceback (most recent call last):")
                for text in corpus_block("005", 0, 9):
                    w.add(text)
                w.add("***** Running training *****")
            if not planted["mid"] and w.bytes >= mid_at:  # an NCCL watchdog timeout, then a restart
                planted["mid"] = True
                block = corpus_block("001")
                truth["failures"]["middle-nccl-watchdog"] = w.add(block[0])
                for text in block[1:]:
                    w.add(text)
                w.add("***** Running training *****")
        # the end: the NCCL watchdog cascade across ranks (verbatim), after the last progress line
        block = corpus_block("002", 5)
        truth["failures"]["late-nccl-watchdog"] = w.add(block[0])
        truth["last_progress"] = {"line": w.line, "step": 13}  # that line starts with a tqdm bar: 13/620
        for text in block[1:]:
            w.add(text)
        w.flush()
        truth["lines"], truth["size"] = w.line, w.bytes
    return truth


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--size", default="50M", help="target size: 10K, 50M, 1G, 5G or bytes")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(json.dumps(generate(args.path, parse_size(args.size), args.seed), indent=2))


if __name__ == "__main__":
    main()
