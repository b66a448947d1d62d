"""Append-only audit log of every action request and decision, as JSON lines.

Every string of an entry (keys too) is redacted as the entry is written; each entry is one
`write` on a file opened with O_APPEND, so concurrent servers never interleave half lines. A
failed write raises AuditError: the caller writes ahead (an entry before the action runs) and
runs nothing when it cannot.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from ml_skills.errors import MLSkillsError
from ml_skills.models import Model
from ml_skills.safety.paths import make_dirs
from ml_skills.safety.redact import PATH_FIELDS, redact_counted, redact_cut, redact_in_line, redact_named

_lock = threading.Lock()


class AuditEntry(Model):
    when: datetime = Field(default_factory=lambda: datetime.now(UTC))
    action: str
    target: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    risk: str | None = None
    rule: str | None = None
    fingerprint: str | None = None
    approved_by: str | None = Field(None, description="Who accepted: the person, through the named MCP client.")
    outcome: str = Field(description="starting, ran, failed, refused, decline, cancel, no-elicitation, elicitation-error, invalid, ...")
    detail: str = ""
    undo: str = Field("", description="How to undo what ran (for a repoint: where the old content is kept).")


MAX_ARGUMENTS = 4000  # characters of an entry's arguments (as JSON) kept whole; longer ones are cut, with their length


class AuditError(MLSkillsError):
    """The audit log cannot be written: no action may run."""


def _redact_value(v: Any) -> Any:
    if isinstance(v, str):
        return redact_counted(v)[0]
    if isinstance(v, dict):  # a value is judged with its key: {"db_password": "X"} holds no pattern's secret in X alone
        # ...and a path field (an entry's target, an action's pointer_file) as it stands in a line, as tool results are:
        # '/tmp/x/R/run/ckpts/latest' alone reads as a PEM key's body line, and the log said `"target": "[REDACTED]"`
        return {redact_counted(str(k))[0]: (redact_in_line(x) if k in PATH_FIELDS else redact_named(str(k), x)) if isinstance(x, str)
                else _redact_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_redact_value(x) for x in v]
    return v


class AuditLog:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def _open(self) -> int:
        """The log opened for appending (created if missing), never through a link, and only a regular file."""
        make_dirs(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(f"{self.path} is not a regular file")
        return fd

    def append(self, entry: AuditEntry) -> None:
        """Write one redacted entry; AuditError when it cannot be written whole."""
        data = entry.model_dump(mode="json")
        args = json.dumps(data["arguments"], ensure_ascii=False)
        if len(args) > MAX_ARGUMENTS:  # a refused call's arguments are the client's: a 1 MB argument made a 1 MB line (74th round)
            data["arguments"] = {"cut": f"{len(args)} characters of arguments; the first {MAX_ARGUMENTS // 2} kept",
                                 "head": redact_cut(args, MAX_ARGUMENTS // 2)}
        line = (json.dumps(_redact_value(data), separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
        with _lock:
            try:
                fd = self._open()
                try:
                    size = os.fstat(fd).st_size
                    if size and os.pread(fd, 1, size - 1) != b"\n":
                        line = b"\n" + line  # a write cut short before (a full disk, a file size limit) left half a line
                    if os.write(fd, line) != len(line):
                        raise OSError("short write")
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                raise AuditError(f"the audit log {self.path} cannot be written ({getattr(e, 'strerror', None) or e})") from None

    def check(self) -> None:
        """At start-up: the log can be opened for appending (created empty if missing), or a clear error."""
        with _lock:
            try:
                os.close(self._open())
            except OSError as e:
                raise AuditError(f"the audit log {self.path} cannot be written ({getattr(e, 'strerror', None) or e}): "
                                 "give a writable file to --audit-log") from None

    def entries(self) -> list[dict[str, Any]]:
        """Every entry; a line a cut write left half-written is kept as {"unparsed": its text}, never dropped."""
        if not self.path.exists():
            return []
        out: list[dict[str, Any]] = []
        for x in self.path.read_text("utf-8", errors="replace").splitlines():
            if x.strip():
                try:
                    out.append(json.loads(x))
                except ValueError:
                    out.append({"unparsed": x})
        return out
