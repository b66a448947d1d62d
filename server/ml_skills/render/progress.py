"""Progress on stderr for long work (a multi-GB scan, a poll), for a person at a terminal only.

The engine never prints: long loops take an optional `Progress` callback (models.py, the base
layer) and call it with what they are doing, how far they are and the total (bytes or seconds). Only the CLI makes one, with
`terminal()`, and only when stderr is a terminal: piped or redirected output, CI logs and the
MCP server (whose stderr is the client's log) never get a byte of it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from ml_skills.models import Progress, wait
from ml_skills.safety.quoting import one_line
from ml_skills.safety.redact import redact

__all__ = ["Progress", "TerminalProgress", "line", "terminal", "wait"]  # Progress and wait are the base layer's (models.py)

MIN_INTERVAL = 0.2  # seconds between redraws: a 10 GB scan reports a few times a second, not per chunk


def _amount(x: float, unit: str) -> str:
    if unit == "B":
        for div, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if x >= div:
                return f"{x / div:.1f} {name}"
        return f"{x:.0f} B"
    return f"{x:.0f} {unit}"


def line(what: str, done: float, total: float | None, unit: str) -> str:
    """One status line: 'scanning train.log: 1.2 GiB of 5.0 GiB (24%)', or 'next poll: 12 s of 60 s'."""
    if total:
        return f"{what}: {_amount(done, unit)} of {_amount(total, unit)} ({min(100.0, 100 * done / total):.0f}%)"
    return f"{what}: {_amount(done, unit)}"


class TerminalProgress:
    """Redraws one line in place (carriage return, erase to end of line), at most every MIN_INTERVAL s."""

    def __init__(self, stream: TextIO, min_interval: float = MIN_INTERVAL) -> None:
        self.stream = stream
        self.min_interval = min_interval
        self.last = -float("inf")
        self.drawn = False

    def __call__(self, what: str, done: float, total: float | None, unit: str = "B") -> None:
        now = time.monotonic()
        if now - self.last < self.min_interval and not (total and done >= total):
            return
        self.last = now
        width = 100
        # the file name comes from the disk: stripped of escapes and redacted before our own \r and erase code go around it
        self.stream.write("\r" + redact(one_line(line(what, done, total, unit)))[:width] + "\x1b[K")
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        """Erase the line, so the report that follows starts clean."""
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


@contextmanager
def terminal(stream: TextIO | None = None) -> Iterator[TerminalProgress | None]:
    """A progress callback when `stream` (default stderr) is a terminal, else None; the line is cleared on exit."""
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced stream
        tty = False
    if not tty:
        yield None
        return
    p = TerminalProgress(stream)
    try:
        yield p
    finally:
        p.clear()
