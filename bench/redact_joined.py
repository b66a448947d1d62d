"""What redaction's joined readings cost (safety/invisible.joined_readings): 2,000 log lines holding U+FFFD (a byte that was
not UTF-8), and 2,000 lines coloured with terminal escapes (each read twice more since the seventieth round), redacted
against the same lines without them, in one process.

    PYTHONPATH=server python bench/redact_joined.py
"""

import random
import time

from ml_skills.safety.redact import redact

random.seed(2)
words = ["step", "loss", "lr", "Fehler", "ung\ufffdltig", "caf\ufffd", "grad_norm", "0.532", "epoch"]
lines = [" ".join(random.choice(words) for _ in range(12)) for _ in range(2000)]
t0 = time.perf_counter()
for l in lines: redact(l)
a = time.perf_counter() - t0
lines2 = [l.replace("\ufffd", "u") for l in lines]
t0 = time.perf_counter()
for l in lines2: redact(l)
b = time.perf_counter() - t0
print(f"2000 lines with U+FFFD {a*1000:.0f} ms, without {b*1000:.0f} ms, ratio {a/b:.2f}")

colours = ["\x1b[32m", "\x1b[0m", "\x1b[1;31m", "\x1b[K"]
coloured = [" ".join(random.choice(colours) + random.choice(words).replace("\ufffd", "u") for _ in range(12)) for _ in range(2000)]
plain = [l.replace("\x1b[32m", "").replace("\x1b[0m", "").replace("\x1b[1;31m", "").replace("\x1b[K", "") for l in coloured]
t0 = time.perf_counter()
for l in coloured: redact(l)
c = time.perf_counter() - t0
t0 = time.perf_counter()
for l in plain: redact(l)
d = time.perf_counter() - t0
print(f"2000 lines with colour escapes {c*1000:.0f} ms, without {d*1000:.0f} ms, ratio {c/d:.2f}")
