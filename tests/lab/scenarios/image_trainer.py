"""A small image classifier over a folder of JPEGs, with the two ways people load images.

    python image_trainer.py data --loading eager     # decode every image into one tensor first
    python image_trainer.py data --loading lazy      # decode per batch in the DataLoader
    python image_trainer.py data --workers 2         # DataLoader worker processes
    NATIVE_CRASH_INDEX=5 python image_trainer.py data --workers 2   # the decoder segfaults on sample 5

Eager loading needs the whole decoded dataset in RAM before the first step (1000 RGB images at
224x224 are 600 MB as float32, twice that while stacking); lazy loading needs one batch.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from trainlog import log_step, rss_mb, stamp, write_config

p = argparse.ArgumentParser(prog="image_trainer.py")
p.add_argument("data")
p.add_argument("--loading", choices=["eager", "lazy"], default="lazy")
p.add_argument("--workers", type=int, default=0)
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--lr", type=float, default=0.01)
args = p.parse_args()
write_config(args)

paths = sorted(Path(args.data).glob("*/*.jpg"))
classes = sorted({q.parent.name for q in paths})


def decode(path: Path) -> torch.Tensor:
    with Image.open(path) as im:
        arr = np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(arr).permute(2, 0, 1)


class Folder(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return len(paths)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if i == int(os.environ.get("NATIVE_CRASH_INDEX", "-1")):
            import ctypes

            ctypes.string_at(0)  # a buggy native decoder reads through a null pointer
        return decode(paths[i]), classes.index(paths[i].parent.name)


print(f"[{stamp()}] found {len(paths)} images in {len(classes)} classes under {args.data}", flush=True)
if args.loading == "eager":
    print(f"[{stamp()}] decoding all {len(paths)} images into memory (rss_mb {rss_mb():.0f})", flush=True)
    images = torch.stack([decode(q) for q in paths])
    targets = torch.tensor([classes.index(q.parent.name) for q in paths])
    data = torch.utils.data.TensorDataset(images, targets)
    print(f"[{stamp()}] decoded {tuple(images.shape)} (rss_mb {rss_mb():.0f})", flush=True)
else:
    data = Folder()
loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                     generator=torch.Generator().manual_seed(0))
model = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(8), torch.nn.Flatten(), torch.nn.Linear(3 * 64, len(classes)))
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
step = 0
for epoch in range(args.epochs):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        log_step(step, epoch=epoch, loss=loss.item(), lr=args.lr)
print(f"[{stamp()}] training completed")
