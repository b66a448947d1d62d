"""Lines around a point of a log, read back after the pass: by seeking to a recorded byte offset
(files) or from the text held in memory (pasted tracebacks); and the quoting of an anomaly's own
line into its finding. The offsets and the text travel in the LogEvidence the scan returns (its
`offsets`, `inode` and `held`), never in module state that concurrent calls would share."""

from __future__ import annotations

from pathlib import Path

from ml_skills.collectors import logfile
from ml_skills.engine.read import tracebacks
from ml_skills.lazyre import lazy
from ml_skills.models import AnomalyKind, Excerpt, LogEvidence
from ml_skills.safety.paths import open_binary
from ml_skills.safety.redact import redact, redact_lines


class Reader:
    """Where a pass reads lines back from: the file by seeking, or the text held in memory."""

    def __init__(self, path: Path | None = None, data: bytes | None = None, end: int | None = None):
        self.path, self.data, self.end = path, data, end  # end: the file's size when the pass began

    def window_at(self, offset: int, before: int, after: int) -> tuple[int, list[str]]:
        if self.path is not None:
            return logfile.window_at(self.path, offset, before, after)
        return logfile.window_in(self.data or b"", offset, before, after)

    def read(self, offset: int, size: int) -> bytes:
        if self.path is not None:
            with open_binary(self.path) as f:
                f.seek(offset)
                return f.read(size)
        return (self.data or b"")[offset : offset + size]

    def tail(self, n: int) -> tuple[list[str], bool]:
        if self.path is not None:
            return logfile.tail(self.path, n, end=self.end)
        lines = (self.data or b"").split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        return [logfile.decode(x) for x in lines[-n:]], False


def excerpt_from_tail(log: LogEvidence, line_no: int, before: int = 20, after: int = 20) -> Excerpt | None:
    """An excerpt for in-memory sources (pasted text, held in the evidence), or from the tail when the line is in it."""
    data = log.held
    if data is not None:
        lines = [logfile.decode(x) for x in data.split(b"\n")]
        first = max(1, line_no - before)
        return Excerpt(source=log.source, start_line=first, lines=redact_lines(lines[first - 1 : line_no + after]))
    if log.tail and log.tail.start_line <= line_no:
        rel = line_no - log.tail.start_line
        lo = max(0, rel - before)
        return Excerpt(source=log.source, start_line=log.tail.start_line + lo, lines=log.tail.lines[lo : rel + after + 1])
    return None


def excerpt_around(log: LogEvidence, line_no: int, before: int = 20, after: int = 20) -> Excerpt:
    """The lines around a recorded hit of a scanned file, read by seeking to the byte offset its evidence
    recorded (when the file is still the one scanned), else by counting lines. Lines the scan kept in its tail are taken
    from there while the file is still the one scanned: a reading of the tail (a summary line, a DeepSpeed skip count) has no recorded offset, and counting
    lines to it read the whole file again (70 MB: 2.5 s, twice a diagnosis)."""
    p, source = Path(log.source), log.source
    same = log.inode == p.stat().st_ino  # still the file scanned (not rotated or replaced since)
    tail = log.tail
    if (same and tail is not None and not tail.truncated and tail.start_line <= max(1, line_no - before)
            and line_no < tail.start_line + len(tail.lines)):
        lo = line_no - tail.start_line - min(before, line_no - tail.start_line)
        return Excerpt(source=source, start_line=tail.start_line + lo, lines=tail.lines[lo : line_no - tail.start_line + after + 1])
    offsets = log.offsets if same else {}
    near = max((ln for ln in offsets if line_no - 2000 <= ln <= line_no), default=None)
    if line_no in offsets:
        idx, lines = logfile.window_at(p, offsets[line_no], before, after)
        first = line_no - idx
    elif near is not None:  # a traceback's last line: seek to the recorded line before it, not from the start
        idx, lines = logfile.window_at(p, offsets[near], before + line_no - near, after + line_no - near)
        first = near - idx
        lo = max(0, line_no - before - first)
        lines, first = lines[lo : line_no - first + after + 1], first + lo
    else:
        first, lines = logfile.window(p, line_no, before, after)
    return Excerpt(source=source, start_line=first, lines=redact_lines(lines))


_NONFINITE = lazy(r"(?i)\b(nan|-?inf(inity)?)\b")
QUOTE_CHARS = 220
LINE_QUOTE = "; the line reads: "  # separates an anomaly's finding from the log line it quotes


def quote_anomaly_lines(ev: LogEvidence, reader: Reader, metric_offsets: dict[int, int]) -> None:
    """Append to each metric anomaly the log line it points at, so the report cites the line itself."""
    for a in ev.trajectory.anomalies:
        off = metric_offsets.get(a.line_no or -1)
        if off is None:
            continue
        _, lines = reader.window_at(off, 0, 0)
        line = tracebacks.ANSI.sub("", lines[0] if lines else "").strip()
        if not line:
            continue
        if len(line) > QUOTE_CHARS:  # keep the part that holds the offending value
            m = _NONFINITE.search(line) if a.kind is AnomalyKind.NAN_ONSET else None
            end = min(len(line), m.end() + 40) if m else len(line)
            line = "..." + line[max(0, end - QUOTE_CHARS) : end]
        a.detail += f"{LINE_QUOTE}{redact(line)}"
