"""Two-rank data-parallel training over Gloo on the CPU, where one rank fails first.

Run without --rank it is the launcher (what torchrun does): it starts two ranks of itself,
sends each rank's stdout+stderr to rank<N>.log in the working directory (torchrun --log-dir
or a shell redirect), and when a rank fails, gives the others a grace period and then sends
SIGTERM to the survivors. Modes:

  raise  rank 1 reads a corrupt record in its shard and raises; rank 0 then fails in all_reduce
  exit   rank 1 dies with os._exit(1) and no message (as after a native crash or an external kill)
  hang   rank 1 blocks in its input pipeline; rank 0 times out in all_reduce (short pg timeout)

Ranks log with timestamps, as logging-based trainers do. With --combined every rank writes to the
launcher's stdout instead (torchrun without --log-dir), so one log holds both, interleaved.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta

FAIL_AT_STEP = 6
PG_TIMEOUT_S = 4
RENDEZVOUS_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(mode: str, grace: float, combined: bool) -> int:
    port = free_port()
    procs = []
    for rank in range(2):
        cmd = [sys.executable, "-u", __file__, "--mode", mode, "--rank", str(rank), "--world-size", "2", "--port", str(port)]
        if combined:  # every rank writes to the launcher's own stdout, interleaved (torchrun's default)
            procs.append(subprocess.Popen(cmd))
            continue
        with open(f"rank{rank}.log", "wb") as log:
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
    where = "interleaved on stdout" if combined else "in rank0.log rank1.log"
    print(f"launched 2 ranks on tcp://127.0.0.1:{port}, logs {where}", flush=True)
    failed: dict[int, int] = {}
    deadline = None
    while True:
        for rank, p in enumerate(procs):
            rc = p.poll()
            if rc is not None and rc != 0 and rank not in failed:
                failed[rank] = rc
                print(f"failed (exitcode: {rc}) local_rank: {rank} (pid: {p.pid})", flush=True)
                deadline = deadline or time.monotonic() + grace
        if all(p.poll() is not None for p in procs):
            break
        if deadline is not None and time.monotonic() > deadline:
            for p in procs:
                if p.poll() is None:
                    print(f"Sending process {p.pid} closing signal SIGTERM", flush=True)
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(timeout=30)
            break
        time.sleep(0.1)
    return 1 if failed else 0


class Shard:
    """A rank's slice of the data; rank 1's holds a corrupt record at FAIL_AT_STEP (mode raise)."""

    def __init__(self, rank: int, mode: str):
        self.rank, self.mode = rank, mode

    def __getitem__(self, step: int):
        import torch

        if self.rank == 1 and step == FAIL_AT_STEP:
            if self.mode == "raise":
                record = "0.12,0.98,-0.33,\x00\x00garbage"
                values = [float(v) for v in record.split(",")]  # raises on the corrupt field
                return torch.tensor(values)
            if self.mode == "exit":
                os._exit(1)
            if self.mode == "hang":
                time.sleep(3600)  # a read that never returns
        g = torch.Generator().manual_seed(step * 2 + self.rank)
        x = torch.randn(32, 16, generator=g)
        return x, x.sum(dim=1, keepdim=True)


def train(rank: int, world: int, port: int, mode: str) -> None:
    import torch
    import torch.distributed as dist

    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s rank{rank} %(levelname)s %(message)s", stream=sys.stdout)
    log = logging.getLogger("train")
    # the rendezvous waits as long as torchrun's would (a peer still importing torch on a loaded machine
    # is late, not dead); only the collectives get the short timeout the hang mode relies on
    store = dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0, timeout=timedelta(seconds=RENDEZVOUS_TIMEOUT_S))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timedelta(seconds=PG_TIMEOUT_S))
    log.info("process group ready: backend=gloo world_size=%d", world)
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = Shard(rank, mode)
    for step in range(1, 40):
        x, y = data[step]
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():  # data parallel by hand: average gradients across ranks
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        log.info("step %d loss %.4f", step, loss.item())
        time.sleep(0.05)
    dist.destroy_process_group()
    log.info("training finished")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["raise", "exit", "hang"], required=True)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--port", type=int)
    ap.add_argument("--grace", type=float, default=PG_TIMEOUT_S + 4,
                    help="after a rank fails, how long the others get to fail on their own before SIGTERM")
    ap.add_argument("--combined", action="store_true", help="all ranks write to one stream instead of one log each")
    a = ap.parse_args()
    if a.rank is None:
        return launch(a.mode, a.grace, a.combined)
    train(a.rank, a.world_size, a.port, a.mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
