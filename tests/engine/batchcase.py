"""What the batch-reading tests share: a case of tests/corpus (or tests/healthy) by its number, the engine's verdict
on a log as (primary cause, run status), the pair those tests compare, and a real training script run to a log."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def case(n: str, kind: str = "corpus") -> Path:
    """The train.log of the case numbered `n` in tests/<kind>."""
    return next((TESTS / kind).glob(f"{n}-*")) / "train.log"


def verdict(log: Path) -> tuple[str | None, str]:
    """The class of the primary cause (None for none) and the run status the engine gives `log`."""
    d = diagnose(DiagnoseRequest(target=str(log)))
    return (d.primary_cause.value if d.primary_cause else None), d.run_status.value


def run_script(tmp_path: Path, code: str, *args: str, check: bool = False) -> Path:
    """Run `code` as tmp_path/train.py with `args`, one CPU thread, its stdout and stderr together in train.log."""
    (tmp_path / "train.py").write_text(textwrap.dedent(code), encoding="utf-8")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        subprocess.run([sys.executable, "train.py", *args], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
                       check=check, timeout=300, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    return log
