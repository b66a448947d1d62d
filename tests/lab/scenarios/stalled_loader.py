"""A training job that deadlocks in its DataLoader and stays alive: the classic fork-under-lock hang.

The dataset guards its sample cache with a threading.Lock. Every few epochs the main process
refreshes the cache index while holding that lock, and (the bug) creates the epoch's DataLoader
iterator inside the `with` block, so the worker processes are forked while the lock is held.
A forked child gets the lock in its locked state with no thread to release it: the worker
blocks forever in __getitem__, and the main process waits forever for its first batch. The
process stays alive, logs nothing more, and no error is ever raised.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

REFRESH_EVERY = 3  # epochs


class CachedDataset(Dataset):
    def __init__(self, n: int):
        self.lock = threading.Lock()
        self.cache: dict[int, torch.Tensor] = {}
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        with self.lock:
            if i not in self.cache:
                g = torch.Generator().manual_seed(i)
                self.cache[i] = torch.randn(8, generator=g)
            x = self.cache[i]
        return x, x.sum().unsqueeze(0)

    def refresh_index(self) -> None:
        self.cache.clear()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    log = logging.getLogger("train")
    torch.manual_seed(0)
    data = CachedDataset(64)
    loader = DataLoader(data, batch_size=8, num_workers=1, shuffle=True)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    step = 0
    log.info("training: %d samples, %d batches per epoch", len(data), len(loader))
    for epoch in range(1, 100):
        if epoch % REFRESH_EVERY == 0:
            with data.lock:
                data.refresh_index()
                batches = iter(loader)  # forks the worker while the lock is held
        else:
            batches = iter(loader)
        for x, y in batches:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
            time.sleep(0.1)
    log.info("training finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
