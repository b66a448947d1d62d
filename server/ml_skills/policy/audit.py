"""Append-only audit log of every action request and decision, as JSON lines.

Arguments are redacted before they are written; each entry is one `write` on a file opened
with O_APPEND, so concurrent servers never interleave half lines.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from ml_skills.models import Model
from ml_skills.safety.redact import redact_counted

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
    outcome: str = Field(description="ran, failed, refused, declined, cancelled, no-elicitation, elicitation-error, invalid")
    detail: str = ""


def _redact_value(v: Any) -> Any:
    if isinstance(v, str):
        return redact_counted(v)[0]
    if isinstance(v, dict):
        return {str(k): _redact_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_redact_value(x) for x in v]
    return v


class AuditLog:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def append(self, entry: AuditEntry) -> None:
        entry = entry.model_copy(update={"arguments": _redact_value(entry.arguments), "detail": redact_counted(entry.detail)[0],
                                         "target": redact_counted(entry.target)[0]})
        line = (entry.model_dump_json() + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(x) for x in self.path.read_text("utf-8").splitlines() if x.strip()]
