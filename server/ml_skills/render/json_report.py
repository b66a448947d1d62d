"""Write check-failed-run.json into --out-dir (the only write a diagnosis makes)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ml_skills.errors import InputError
from ml_skills.modelkit import BaseModel
from ml_skills.models import Diagnosis
from ml_skills.safety.paths import write_bytes
from ml_skills.safety.redact import redact_value

FILENAME = "check-failed-run.json"


def write(d: Diagnosis, out_dir: str | os.PathLike[str], dir_fd: int | None = None) -> Path:
    """Write check-failed-run.json (through `dir_fd`, a held fd on out_dir, when given: see write_at)."""
    if dir_fd is not None:
        return write_at(d, dir_fd, Path(out_dir), FILENAME)
    return write_model(d, out_dir, FILENAME)


def write_at(d: BaseModel, dir_fd: int, out_dir: Path, filename: str) -> Path:
    """Write atomically into the directory `dir_fd` holds, never through a path: the MCP server checks an
    out dir when a call begins and writes when the diagnosis ends, seconds later, and the folder's path
    can name another folder by then (swapped for a link out of the roots)."""
    data = redact_value(d).model_dump_json(indent=2)
    tmp = f".{filename}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data + "\n")
            os.replace(tmp, filename, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise
    except OSError as e:
        raise InputError(f"cannot write {out_dir / filename}: {e.strerror or e}") from None
    return out_dir / filename


def write_model(d: BaseModel, out_dir: str | os.PathLike[str], filename: str) -> Path:
    """Write atomically (temp file + rename) so a reader never sees half a report."""
    data = redact_value(d).model_dump_json(indent=2)  # the last step: whatever was added since, stripped and redacted
    return write_bytes((data + "\n").encode("utf-8"), out_dir, filename)


