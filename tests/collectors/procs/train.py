"""A tiny real training loop (pure Python SGD on y = 3x + 1) that ends the way real runs end.

    python train.py MODE [STEPS]

MODE: ok (trains, then keeps running), stall (trains, then blocks forever reading a pipe nobody
writes: a data worker that never delivers), spin (trains, then busy-waits without logging, like
a rank spinning in a collective), diverge (lr too high: the loss overflows and the finiteness
check raises), sleep (prints one line, then sleeps). Stdout is the log (run it as
`python train.py MODE > train.log`). Only the standard library, so any python3 can run it.
"""

import math
import os
import random
import sys
import time

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else (200 if mode == "diverge" else 20)
print(f"starting mode={mode} pid={os.getpid()}", flush=True)
if mode == "sleep":
    time.sleep(120)
    sys.exit(0)

rng = random.Random(0)
data = [(x, 3 * x + 1 + rng.gauss(0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(256))]
w, b = 0.0, 0.0
lr = 600.0 if mode == "diverge" else 0.1
for step in range(1, steps + 1):
    gw = gb = loss = 0.0
    for x, y in data:
        err = w * x + b - y
        loss += err * err / len(data)
        gw += 2 * err * x / len(data)
        gb += 2 * err / len(data)
    if not math.isfinite(loss):
        raise FloatingPointError(f"Loss is {loss} at step {step}: stopping training")
    w, b = w - lr * gw, b - lr * gb
    print(f"step {step} | loss {loss:.6f} | lr {lr}", flush=True)
    time.sleep(0.005 if mode == "diverge" else 0.02)

if mode == "ok":
    while True:  # keep training: more epochs, logging as it goes (a minibatch's loss moves, as a real run's does)
        for _ in range(20000):
            w += 1e-12
        batch = rng.sample(data, 32)
        loss = sum((w * x + b - y) ** 2 for x, y in batch) / len(batch)
        print(f"step {step} | loss {loss:.6f} | lr {lr}", flush=True)
        step += 1
if mode == "stall":
    r, _ = os.pipe()
    os.read(r, 1)
if mode == "spin":
    while True:
        pass
