"""Write a small image-classification dataset of real JPEGs: <out>/<class>/<n>.jpg.

    python make_images.py data --n 1000 --size 224                 # all valid
    python make_images.py data --n 64 --truncate 1                 # one JPEG cut short (a partial download)
    python make_images.py data --n 64 --odd-size 1                 # one image of another size
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--n", type=int, default=64)
p.add_argument("--size", type=int, default=32)
p.add_argument("--classes", type=int, default=4)
p.add_argument("--truncate", type=int, default=0, help="how many files to cut short")
p.add_argument("--odd-size", type=int, default=0, help="how many images get a different size")
args = p.parse_args()

rng = np.random.default_rng(0)
ramp = np.linspace(0, 255, args.size, dtype=np.float32)
paths = []
for i in range(args.n):
    c = i % args.classes
    d = Path(args.out) / f"class_{c}"
    d.mkdir(parents=True, exist_ok=True)
    base = np.stack([np.add.outer(ramp, ramp * (c + 1) / args.classes) / 2] * 3, axis=-1)
    img = np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)
    if i < args.odd_size:
        img = img[: args.size * 3 // 4]  # cropped by an upstream step that forgot to resize
    path = d / f"{i:05d}.jpg"
    Image.fromarray(img).save(path, quality=90)
    paths.append(path)
for path in paths[len(paths) // 2 : len(paths) // 2 + args.truncate]:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
print(f"wrote {len(paths)} images to {args.out}")
