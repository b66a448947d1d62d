"""What redaction's joined reading costs (safety/invisible.joined_reading): 2,000 log lines holding U+FFFD (a byte that was
not UTF-8) redacted, against the same lines without it, in one process.

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
