"""Figures the security tests record as they prove a promise, gathered by tests/security/report.py.

A test calls `record(kind, what, n)` once its assertions have passed; when ML_SKILLS_FIGURES
names a file, one JSON line is appended to it. Otherwise nothing happens, so an ordinary test
run is unchanged. The figures in docs/security.md come from these lines, not from hand counts.
"""

from __future__ import annotations

import json
import os

ENV = "ML_SKILLS_FIGURES"


def record(kind: str, what: str, n: float) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"kind": kind, "what": what, "n": n}) + "\n")
