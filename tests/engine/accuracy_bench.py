"""The scorer the corpus, healthy, plan and confidence tests share (tests/scoring/accuracy.py, run by bench/accuracy.py)."""

from __future__ import annotations

from types import ModuleType


def load() -> ModuleType:
    from tests.scoring import accuracy

    return accuracy
