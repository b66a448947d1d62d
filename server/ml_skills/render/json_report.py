"""Write check-failed-run.json into --out-dir (the only write a diagnosis makes)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import BaseModel

from ml_skills.errors import InputError
from ml_skills.models import Diagnosis
from ml_skills.safety.redact import redact_value

FILENAME = "check-failed-run.json"


def write(d: Diagnosis, out_dir: str | os.PathLike[str]) -> Path:
    """Write check-failed-run.json."""
    return write_model(d, out_dir, FILENAME)


def write_model(d: BaseModel, out_dir: str | os.PathLike[str], filename: str) -> Path:
    """Write atomically (temp file + rename) so a reader never sees half a report."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create --out-dir {out}: {e.strerror or e}") from None
    target = out / filename
    data = redact_value(d).model_dump_json(indent=2)  # the last step: whatever was added since, stripped and redacted
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{filename}.", suffix=".tmp", dir=out)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data + "\n")
        os.replace(tmp, target)
    except OSError as e:
        raise InputError(f"cannot write {target}: {e.strerror or e}") from None
    return target
