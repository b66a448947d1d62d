"""A prepared action: what the person is shown, and the fingerprint that binds an approval to it.

Kept apart from the action kinds (actions.py, repoint.py) so each kind's module can build one, with
the one helper both use to read and write a file through the folder that was checked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ml_skills.models import ActionKind, Model
from ml_skills.safety.paths import open_fd, within


@dataclass
class Prepared:
    action: Model
    kind: ActionKind
    target: str
    summary: str
    impact: str
    undo: str
    manual: str = ""
    identity: dict[str, Any] = field(default_factory=dict)
    run: Callable[[], str] = field(default=lambda: "")
    also: list[ActionKind] = field(default_factory=list)  # other kinds this request amounts to (a repoint that rolls back)

    @property
    def fingerprint(self) -> str:
        blob = json.dumps({"action": self.action.model_dump(mode="json"), "identity": self.identity}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def arguments(self) -> dict[str, Any]:
        return self.action.model_dump(mode="json")


def held_dir(path: Path, roots: Sequence[Path]) -> int:
    """A held fd on the file's folder, opened from its root with no symlink followed: what is read
    and written through it stays in the folder that was checked, even if its path is swapped meanwhile."""
    with within(roots):
        return open_fd(path.parent, "dir")
