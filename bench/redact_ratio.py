"""CPU cost of redacting 1 MB lines built from a pattern's prefix, as a ratio to 1 MB of random letters.

The measure of tests/security/test_redact.py's backtracking test (least of three CPU timings in one process), for
every hostile unit or those named: `python bench/redact_ratio.py [SERVER_DIR] [UNIT_NAME ...]` (SERVER_DIR: another
checkout's server/, to compare commits)."""

from __future__ import annotations

import random
import string
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
MB = 1 << 20


def _least_cpu(redact, text: str, tries: int = 3) -> float:
    best = float("inf")
    for _ in range(tries):
        t0 = time.process_time()
        redact(text)
        best = min(best, time.process_time() - t0)
    return best


def main(argv: list[str]) -> None:
    server = argv[0] if argv and Path(argv[0]).is_dir() else str(HERE / "server")
    names = argv[1:] if argv and Path(argv[0]).is_dir() else argv
    sys.path.insert(0, server)
    sys.path.insert(0, str(HERE))
    from ml_skills.safety.redact import redact_counted

    from tests.security.test_redact import HOSTILE

    rng = random.Random(7)
    reference = _least_cpu(redact_counted, "".join(rng.choice(string.ascii_letters + " ") for _ in range(MB)))
    print(f"reference: {reference:.3f} s CPU for 1 MB of random letters ({redact_counted.__module__} from {server})")
    for name, unit in HOSTILE.items():
        if names and name not in names:
            continue
        hostile = (unit * (MB // len(unit) + 1))[:MB]
        print(f"{name:24} {_least_cpu(redact_counted, hostile) / reference:5.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
