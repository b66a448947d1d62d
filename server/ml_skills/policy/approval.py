"""What the person is asked, and the ledger that makes an approval single-use.

An approval is bound to the fingerprint of the exact prepared action (policy/actions.py) and to
a nonce the server minted for that question; once an action has run on it, the nonce is spent.
Nothing a tool caller sends can stand in for it: there is no argument that means "approved".
"""

from __future__ import annotations

import threading

from pydantic import BaseModel, Field

from ml_skills.policy.prepared import Prepared
from ml_skills.policy.rules import Verdict
from ml_skills.safety.quoting import strip_invisible
from ml_skills.safety.redact import redact


class Approve(BaseModel):
    """The one question asked: run exactly this action?"""

    approve: bool = Field(description="Yes: run exactly the action described above, once.")


def one_line(text: str) -> str:
    """A field of the question on one line: escapes, invisible characters and line breaks cannot
    forge a line of their own (untrusted parts are already quoted by policy/actions.py)."""
    text, _ = strip_invisible(text)
    return redact("".join(c if c.isprintable() else " " for c in text))


def question(p: Prepared, v: Verdict) -> str:
    return "\n".join(one_line(x) for x in (
        f"ml-skills asks to run an action ({v.risk.value}).",
        f"Action: {p.summary}",
        f"Risk: {v.risk.value} ({v.rule})",
        f"Expected impact: {p.impact}",
        f"How to undo: {p.undo}",
        f"Approval id: {p.fingerprint} (valid for this exact action, once)",
    ))


class Ledger:
    """Nonces of approvals already used; a replayed approval finds its nonce here."""

    def __init__(self) -> None:
        self._spent: set[str] = set()
        self._lock = threading.Lock()

    def spend(self, nonce: str) -> bool:
        """Mark a nonce used; False if it already was."""
        with self._lock:
            if nonce in self._spent:
                return False
            self._spent.add(nonce)
            return True

    def spent(self, nonce: str) -> bool:
        with self._lock:
            return nonce in self._spent
