"""The deadline of the tool call a thread works for.

A tool that runs past its deadline is answered 'did not finish' and its worker thread abandoned; a loop over a file
checks the deadline between chunks, so that thread stops working too (twenty-ninth round: an abandoned grep_log kept a
core busy for 35 s after its answer, and calls retried on a large log stacked such threads). Outside a tool call (the
CLI) there is no deadline and check() does nothing.
"""

from __future__ import annotations

import time
from contextvars import ContextVar, Token

from ml_skills.errors import DeadlinePassed

_deadline: ContextVar[float | None] = ContextVar("ml_skills_call_deadline", default=None)


def start(seconds: float) -> Token[float | None]:
    """Set the deadline of the call this context runs, `seconds` from now (worker threads the call starts inherit it)."""
    return _deadline.set(time.monotonic() + seconds)


def end(token: Token[float | None]) -> None:
    _deadline.reset(token)


def check() -> None:
    """Raise DeadlinePassed when the call this thread works for has passed its deadline."""
    at = _deadline.get()
    if at is not None and time.monotonic() > at:
        raise DeadlinePassed("the tool call ran past its deadline and was answered already: its work was stopped")
