"""A small real PyTorch training job on the CPU, launched as a child process and relaunched like a job.

It trains a tiny MLP, logs every 5 steps and saves `checkpoint-<step>.pt` every 10 into the run
directory; relaunched with `resume`, it loads the newest checkpoint there and goes on. Two
failures really happen to it: at `long_sample_at` the batch holds one sample so long that its
attention scores need terabytes, and the allocation fails (the same sample at the same step on
every launch: a deterministic out-of-memory), and `kill_at` SIGKILLs it (what a preemption or a
scheduler does: once, wherever the run happens to be). Under torchrun, `kill_at` may be a list:
the step for each restart of the worker group (TORCHELASTIC_RESTART_COUNT), null for none.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

import torch


def log(msg: str) -> None:
    print(f"[{datetime.now():%Y-%m-%d %H:%M:%S}] {msg}", flush=True)


def main() -> int:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    out = Path(cfg["run_dir"])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(256, 8)
    y = x.sum(dim=1, keepdim=True)
    start = 1
    saved = sorted(out.glob("checkpoint-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    if cfg.get("resume") and saved:
        state = torch.load(saved[-1], weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = state["step"] + 1
        log(f"resumed from {saved[-1]} at step {state['step']}")
    log(f"training for {cfg['steps']} steps from step {start}")
    kill_at = cfg.get("kill_at")
    if isinstance(kill_at, list):
        restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        kill_at = kill_at[restart] if restart < len(kill_at) else None
    for step in range(start, cfg["steps"] + 1):
        i = (step * 32) % 256
        if cfg.get("long_sample_at") == step:
            tokens = torch.zeros(1, 1_000_000, 16)  # one sample of a million tokens in this batch
            scores = tokens @ tokens.transpose(1, 2)  # its attention scores: 1e12 floats, about 4 TB
            log(f"attention {tuple(scores.shape)}")
        loss = torch.nn.functional.mse_loss(model(x[i : i + 32]), y[i : i + 32])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0:
            log(f"step {step} | loss {loss.item():.6f}")
        if step % 10 == 0:
            torch.save({"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}, out / f"checkpoint-{step}.pt")
            log(f"saved checkpoint-{step}.pt")
        if kill_at == step:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.002)
    log("training complete")
    return 0


if __name__ == "__main__":
    sys.exit(main())
