"""Train/validation overlap: the split is made after oversampling, so validation repeats training.

The dataset is small and its labels carry no signal the model could learn (as with a broken
label join), so honest validation accuracy would stay at chance. The script oversamples it
(each sample repeated, as a "balance"/augmentation step does) and only then splits 90/10 at
random: nearly every validation sample is an exact copy of a training sample. The model
memorises the copies within the first epoch and validation accuracy is perfect at once.
"""

from __future__ import annotations

import logging
import sys

import torch
from torch.utils.data import TensorDataset, random_split

UNIQUE = 128
REPEATS = 40
EPOCHS = 6


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    log = logging.getLogger("train")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(UNIQUE, 16, generator=g)
    y = torch.randint(0, 4, (UNIQUE,), generator=g)  # labels independent of x
    full = TensorDataset(x.repeat(REPEATS, 1), y.repeat(REPEATS))  # oversampling...
    n_val = len(full) // 10
    train_set, val_set = random_split(full, [len(full) - n_val, n_val], generator=g)  # ...then the split
    log.info("train %d samples, validation %d samples", len(train_set), len(val_set))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    tx, ty = full.tensors[0][train_set.indices], full.tensors[1][train_set.indices]
    vx, vy = full.tensors[0][val_set.indices], full.tensors[1][val_set.indices]
    for epoch in range(1, EPOCHS + 1):
        total, n = 0.0, 0
        order = torch.randperm(len(tx), generator=g)
        for i in range(0, len(tx), 64):
            bx, by = tx[order[i : i + 64]], ty[order[i : i + 64]]
            loss = torch.nn.functional.cross_entropy(model(bx), by)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, n = total + loss.item() * len(bx), n + len(bx)
        with torch.no_grad():
            out = model(vx)
            val_loss = torch.nn.functional.cross_entropy(out, vy).item()
            val_acc = (out.argmax(1) == vy).float().mean().item()
        log.info("epoch %d train_loss %.4f val_loss %.4f val_acc %.4f", epoch, total / n, val_loss, val_acc)
    log.info("training finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
