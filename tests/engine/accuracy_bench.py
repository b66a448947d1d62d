"""bench/accuracy.py loaded as a module, once: the scorer the corpus, healthy, plan and confidence tests share."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "accuracy.py"


@cache
def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("accuracy_bench", BENCH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
