"""Which rank of a multi-process run failed first, read from every rank's own log.

When one rank dies or hangs, the others fail later in a collective (Gloo "Connection closed by
peer", an NCCL watchdog timeout): their errors are the loud ones, and the real cause is the
quiet rank. Each log (a rank) ends in one of three ways after its last progress line: with an
error of its own, with only a symptom (it waited for a peer), or with nothing at all (it hung,
or died without a message). The first rank to fail is the earliest own error; with none, a rank
that stopped silently while others waited for it; with neither, the earliest symptom. "Earliest"
is by timestamp when every candidate has one (the line's own, or the nearest line before it
that carries one), otherwise by the step it reached and then by line order. When one log holds
every rank (torchrun without --log-dir), ranks are told apart by the tag on each error line and
ordered by line.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ml_skills.engine.classify.signals import Signal
from ml_skills.engine.read.metrics import parse_timestamp
from ml_skills.lazyre import lazy
from ml_skills.models import AnomalyKind, Classification, FailureClass, LogEvidence, Role

# torch's own prefix on rank output ("[rank1]: Traceback"), NCCL's "[Rank 1]", loggers' "rank1"
# and the launcher's report of a rank it lost ('failed (exitcode: -9) local_rank: 1 (pid: 42)')
RANK_TAG = lazy(r"^\[rank(\d+)\]:|\[Rank (\d+)\]|\brank(\d+)\b|\blocal_rank:\s*(\d+)")


# per-rank log names: rank1.log, node-0.out, worker_3.log, or torchrun --log-dir's <run>/attempt_0/<rank>/stdout.log
RANK_NAME = lazy(r"(?i)(rank|node|worker|host|proc)[-_.]?\d")


def _rank_named(source: str) -> bool:
    p = Path(source.split(" [", 1)[0])
    return bool(RANK_NAME.search(p.name) or RANK_TAG.search(source) or p.parent.name.isdigit())


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


def _raw(log: LogEvidence, line_no: int | None) -> str | None:
    """The line as written (a traceback's event text has its rank prefix stripped)."""
    if log.tail is None or line_no is None or not 0 <= line_no - log.tail.start_line < len(log.tail.lines):
        return None
    return log.tail.lines[line_no - log.tail.start_line]


_OWN_DEATHS = frozenset({"sigkill-exit-137", "sigkill-external", "segfault"})


def _interleaved(log: LogEvidence, signals: list[Signal]) -> list[RankEnd]:
    """Ranks of one log that holds them all (torchrun without --log-dir): by each line's rank tag."""
    firsts: dict[str, RankEnd] = {}
    mine = sorted((s for s in signals if s.source == log.source and s.line_no and not s.survived and not s.warning
                   and s.kind in ("signature", "traceback") and s.role is not Role.HINT), key=lambda s: s.line_no or 0)
    for s in mine:
        m = RANK_TAG.search(_raw(log, s.line_no) or s.text)
        if m is None or s.line_no is None:
            continue
        rank = f"rank{next(g for g in m.groups() if g is not None)}"
        # a rank killed or crashed (SIGKILL, SIGSEGV) ended by itself: its death is its own error, not a reaction
        kind = "error" if s.role is Role.CAUSE or s.label in _OWN_DEATHS else "symptom"
        prev = firsts.get(rank)
        if prev is None or (prev.kind == "symptom" and kind == "error"):
            firsts[rank] = RankEnd(f"{log.source} [{rank}]", kind, s.line_no, s.text, parse_timestamp(s.text[:200]), None)
    return list(firsts.values())


def _torn_down(log: LogEvidence, failed: RankEnd) -> list[RankEnd]:
    """The ranks of one log that made progress and then said nothing: the launcher tore them down after the failed
    rank died (torchrun SIGTERMs the peers, often before a collective of theirs can fail), or, when the one rank that
    spoke only timed out waiting, the silent ones are those it waited for."""
    return [RankEnd(f"{log.source} [rank{r}]", "stopped", ln, f"step {_fmt_step(st)}", None, st)
            for r, (st, ln, _) in sorted(_rank_progress([log]).items()) if not failed.source.endswith(f"[rank{r}]")]


def first_failing(logs: list[LogEvidence], signals: list[Signal]) -> tuple[RankEnd, list[RankEnd]] | None:
    """(the first rank to fail, the others), or None unless two ranks' endings can be told apart."""
    ranks = [e for log in logs if (e := rank_end(log, signals)) is not None]
    ranks = [e for e in ranks if e.kind != "stopped" or e.step is not None or e.time is not None]
    if len(ranks) < 2 and len(logs) == 1:
        ranks = _interleaved(logs[0], signals)  # one log, every rank in it: line order is time order
        if len(ranks) == 1:  # one rank failed or waited; the others made progress and then said nothing
            ranks += _torn_down(logs[0], ranks[0])
    if len(ranks) < 2:
        return None
    if sum(e.kind != "stopped" for e in ranks) < 2 and not all(_rank_named(e.source) for e in ranks):
        return None  # one failing log beside another attempt's or job's log: no ranks to order
    errors = [e for e in ranks if e.kind == "error"]
    stopped = [e for e in ranks if e.kind == "stopped"]
    waiting = [e for e in ranks if e.kind == "symptom"]
    pool = errors or (stopped if waiting else []) or ranks
    first = _order(pool)[0]
    return first, [e for e in ranks if e is not first]


def rank_reached(e: RankEnd) -> str:
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
        head = (f"The first rank to fail was {name}: it stopped making progress at line {first.line_no}{rank_reached(first)} "
                "with no error of its own (it hung, or died without a message), and the others waited for it.")
    else:
        what = "its own error" if first.kind == "error" else "a collective error"
        head = f"The first rank to fail was {name}: {what} at line {first.line_no}{rank_reached(first)}: {first.text[:160]}."
    tails = []
    for e in others:
        o = Path(e.source).name
        match e.kind:
            case "symptom":
                tails.append(f"{o} failed after it in a collective (line {e.line_no}{rank_reached(e)}: {e.text[:120]}), a consequence")
            case "error":
                tails.append(f"{o} also raised its own error later (line {e.line_no}{rank_reached(e)}: {e.text[:120]})")
            case _:
                tails.append(f"{o} stopped at line {e.line_no}{rank_reached(e)} without an error")
    return head + (" Then " + "; ".join(tails) + "." if tails else "")


def _ended(log: LogEvidence) -> bool:
    lp = log.trajectory.last_progress
    after = lp.line_no if lp else 0
    return any(t.line_no > after for t in log.tracebacks) or any(
        h.line_no > after and h.role is not Role.HINT for h in log.hits)


def drop_stalls_of_ended_run(logs: list[LogEvidence]) -> None:
    """A silent log beside one that ended in an error belongs to a run that has ended, not a live hang.

    Its silence (a rank that hung and was then torn down, or died without a message) is told by
    the first-rank analysis; calling it a stall would make the diagnosis depend on how long after
    the failure it was run.
    """
    if len(logs) < 2 or not any(_ended(log) for log in logs):
        return
    for log in logs:
        log.trajectory.anomalies = [a for a in log.trajectory.anomalies if a.kind is not AnomalyKind.NO_PROGRESS]


def keep_silent_rank_open(cls: Classification, logs: list[LogEvidence], signals: list[Signal]) -> None:
    """When the first rank stopped without a word, it hung or died: neither may be 'ruled out'."""
    found = first_failing(logs, signals)
    if found is None or found[0].kind != "stopped":
        return
    silent = (FailureClass.STALLED, FailureClass.PROCESS_CRASH)
    cls.ruled_out = [r for r in cls.ruled_out if not (r.failure_class in silent and r.reason.startswith("no evidence"))]


# The NCCL watchdog's report of the collective each rank timed out in, and a world size where the log gives one
_WORK = lazy(r"\[(?:PG (?P<pg>\S+) )?Rank (?P<rank>\d+)\][^\n]*?WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel>\d+))?")
_WORLD = lazy(r"(?i)\b(?:world[_ ]size|WORLD_SIZE|nranks)\s*(?:[=:]\s*)?(?P<n>\d+)\b")


def collective_desync(logs: list[LogEvidence]) -> str:
    """What the ranks' watchdog lines say together: ranks in different collectives, or ranks missing from them.

    Every rank whose collective timed out prints the work it was waiting in (its sequence number, op and size).
    Ranks at different sequence numbers, or in the same one with different sizes, issued different collectives
    (a desync: one rank skipped a step, took another branch or has another number of batches); a rank of the
    world that printed no timeout was not in the collective at all (it hung or died before it).
    """
    works: dict[int, tuple[int, str, str | None]] = {}
    seen: dict[int, set[tuple[str | None, int]]] = {}
    world: int | None = None
    for log in logs:
        lines = [*(log.tail.lines if log.tail else []), *(h.text for h in log.hits)]
        for line in lines:
            for m in _WORK.finditer(line):
                works.setdefault(int(m["rank"]), (int(m["seq"]), m["op"], m["numel"]))
                seen.setdefault(int(m["rank"]), set()).add((m["pg"], int(m["seq"])))
            if (w := _WORLD.search(line)) is not None and 1 < int(w["n"]) <= 100_000:
                world = max(world or 0, int(w["n"]))
    if len(works) < 2 and not (works and world):
        return ""
    if any(len(v) > 1 for v in seen.values()):
        # a rank timed out in several works: sequence numbers count per process group, and without the group
        # on each line they cannot be compared across ranks
        return ""
    def one(r: int) -> str:
        seq, op, numel = works[r]
        return f"rank {r} in SeqNum {seq} ({op}{f', {int(numel)} elements' if numel else ''})"
    shown = ", ".join(one(r) for r in sorted(works)[:8])
    seqs = {works[r][0] for r in works}
    sizes = {(works[r][0], works[r][2]) for r in works if works[r][2] is not None}
    notes = []
    if len(seqs) > 1:
        notes.append(f"The ranks timed out in different collectives ({shown}), {max(seqs) - min(seqs)} sequence "
                     "numbers apart: a desync - the ranks no longer issue the same collectives in the same order (a rank "
                     "that skipped or repeated a step, took another code path, or ran out of data first).")
    elif len({n for _, n in sizes}) > 1:
        notes.append(f"The ranks wait in the same collective number with different sizes ({shown}): they issued "
                     "different collectives at the same point (a desync).")
    if world is not None and len(works) < world:
        missing = [r for r in range(world) if r not in works]
        if len(missing) <= 8:
            notes.append(f"Rank(s) {', '.join(map(str, missing))} of the {world} printed no timeout: "
                         "missing from the collective, they hung or died before it and are the ones to look at first.")
    return " ".join(notes)


def progress_by_rank(logs: list[LogEvidence]) -> str:
    """Each rank's last logged step when ranks share one log ('rank 1 step 60 (line 248)'), or ''."""
    progress = _rank_progress(logs)
    if len(progress) < 2:
        return ""
    return "Last progress per rank: " + "; ".join(
        f"rank {r} step {_fmt_step(st)} (line {ln}{f', {t:%H:%M:%S}' if t else ''})" for r, (st, ln, t) in sorted(progress.items())[:8]) + "."


def _fmt_step(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _rank_progress(logs: list[LogEvidence]) -> dict[int, tuple[float, int, datetime | None]]:
    """Each rank's last logged step, from the rank-tagged metric lines of the kept tail: (step, line, time)."""
    from ml_skills.engine.read.metric_lines import rank_of
    from ml_skills.engine.read.metrics import parse_line

    out: dict[int, tuple[float, int, datetime | None]] = {}
    for log in logs:
        if log.tail is None:
            continue
        for i, line in enumerate(log.tail.lines, log.tail.start_line):
            r = rank_of(line)
            if r is None:
                continue
            parsed = parse_line(line)
            if parsed is not None and parsed[1] is not None:
                out[r] = (parsed[1], i, parse_timestamp(line[:200]))
    return out
