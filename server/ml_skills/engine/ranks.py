"""Which rank of a multi-process run failed first, read from every rank's own log.

When one rank dies or hangs, the others fail later in a collective (Gloo "Connection closed by
peer", an NCCL watchdog timeout): their errors are the loud ones, and the real cause is the
quiet rank. Each log (a rank) ends in one of three ways after its last progress line: with an
error of its own, with only a symptom (it waited for a peer), or with nothing at all (it hung,
or died without a message). The first rank to fail is the earliest own error; with none, a rank
that stopped silently while others waited for it; with neither, the earliest symptom. "Earliest"
is by timestamp when every candidate has one (the line's own, or the nearest line before it
that carries one), otherwise by the step it reached and then by line order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ml_skills.engine.classify import Signal
from ml_skills.engine.metrics import parse_timestamp
from ml_skills.models import LogEvidence, Role


@dataclass
class RankEnd:
    source: str
    kind: str  # error, symptom, stopped
    line_no: int
    text: str
    time: datetime | None
    step: float | None
    stamped: bool = False  # the time is the line's own, not the nearest earlier line's


def _time_at(log: LogEvidence, line_no: int) -> datetime | None:
    """The nearest timestamp at or before a line, in the kept tail (an unstamped traceback's time)."""
    if log.tail is None:
        return None
    rel = line_no - log.tail.start_line
    for line in reversed(log.tail.lines[: max(0, rel + 1)]):
        t = parse_timestamp(line[:200])
        if t is not None:
            return t
    return None


def rank_end(log: LogEvidence, signals: list[Signal]) -> RankEnd | None:
    """How one rank's log ends: its first own error, else its first symptom, else where it stopped."""
    lp = log.trajectory.last_progress
    step = lp.step if lp else None
    mine = sorted((s for s in signals if s.source == log.source and s.line_no and not s.survived and not s.warning
                   and s.kind in ("signature", "traceback")), key=lambda s: s.line_no or 0)
    for kind, role in (("error", Role.CAUSE), ("symptom", Role.SYMPTOM)):
        s = next((x for x in mine if x.role is role), None)
        if s is not None and s.line_no is not None and (lp is not None or kind == "error"):  # a rank trains or fails
            own = parse_timestamp(s.text[:200])
            return RankEnd(log.source, kind, s.line_no, s.text, own or _time_at(log, s.line_no), step, own is not None)
    if lp is None or "completed-marker" in log.frameworks:
        return None  # a launcher's log, or a rank that finished
    return RankEnd(log.source, "stopped", lp.line_no, lp.text, lp.time, step, lp.time is not None)


def _order(pool: list[RankEnd]) -> list[RankEnd]:
    if all(e.time is not None for e in pool):
        return sorted(pool, key=lambda e: (e.time, e.line_no))
    return sorted(pool, key=lambda e: (e.step if e.step is not None else float("inf"), e.line_no))


def first_failing(logs: list[LogEvidence], signals: list[Signal]) -> tuple[RankEnd, list[RankEnd]] | None:
    """(the first rank to fail, the others), or None with fewer than two ranks' logs."""
    ranks = [e for log in logs if (e := rank_end(log, signals)) is not None]
    ranks = [e for e in ranks if e.kind != "stopped" or e.step is not None or e.time is not None]
    if len(ranks) < 2:
        return None
    errors = [e for e in ranks if e.kind == "error"]
    stopped = [e for e in ranks if e.kind == "stopped"]
    waiting = [e for e in ranks if e.kind == "symptom"]
    pool = errors or (stopped if waiting else []) or ranks
    first = _order(pool)[0]
    return first, [e for e in ranks if e is not first]


def _when(e: RankEnd) -> str:
    parts = []
    if e.step is not None:
        parts.append(f"after step {int(e.step) if float(e.step).is_integer() else e.step}")
    if e.time is not None and e.stamped:
        parts.append(f"at {e.time:%H:%M:%S}")
    return (" " + ", ".join(parts)) if parts else ""


def describe(logs: list[LogEvidence], signals: list[Signal]) -> str:
    """One sentence naming the first rank to fail and how the others followed, or ''."""
    found = first_failing(logs, signals)
    if found is None:
        return ""
    first, others = found
    name = Path(first.source).name
    if first.kind == "stopped":
        head = (f"The first rank to fail was {name}: it stopped making progress at line {first.line_no}{_when(first)} "
                "with no error of its own (it hung, or died without a message), and the others waited for it.")
    else:
        what = "its own error" if first.kind == "error" else "a collective error"
        head = f"The first rank to fail was {name}: {what} at line {first.line_no}{_when(first)}: {first.text[:160]}."
    tails = []
    for e in others:
        o = Path(e.source).name
        match e.kind:
            case "symptom":
                tails.append(f"{o} failed after it in a collective (line {e.line_no}{_when(e)}: {e.text[:120]}), a consequence")
            case "error":
                tails.append(f"{o} also raised its own error later (line {e.line_no}{_when(e)}: {e.text[:120]})")
            case _:
                tails.append(f"{o} stopped at line {e.line_no}{_when(e)} without an error")
    return head + (" Then " + "; ".join(tails) + "." if tails else "")
