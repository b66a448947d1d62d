"""The real logs the whole-log equivalence tests read (two engines, two code paths, a memo: the same answer either way).

Every corpus and healthy log is read by `python bench/verdicts.py run` before any engine change lands; these tests read a
stable sample so the suite stays well inside CI's time as the corpus grows. A log is in the sample by a hash of its path
below tests/, so adding cases never reshuffles which older ones are read.
"""

from __future__ import annotations

import zlib
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def logs(*patterns: str) -> list[Path]:
    """Every file below tests/ matching the glob patterns, sorted within each pattern, in the patterns' order."""
    return [p for pattern in patterns for p in sorted(TESTS.glob(pattern))]


def sample(paths: list[Path], one_in: int) -> list[Path]:
    """About one path in `one_in`, chosen by a hash of its place below tests/ (stable as cases are added)."""
    return [p for p in paths if zlib.crc32(str(p.relative_to(TESTS)).encode()) % one_in == 0]


CORPUS_AND_HEALTHY = logs("corpus/*/train.log", "healthy/*/train.log")
