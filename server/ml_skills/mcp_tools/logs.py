"""Log reading tools: the tail, a window around a line, a bounded grep. Thin over collectors/logfile."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import Field

from ml_skills.collectors import logfile
from ml_skills.errors import InputError, UnreadableInput
from ml_skills.mcp_tools.common import ToolResult, roots, tool
from ml_skills.models import EvidenceStatus
from ml_skills.safety.paths import confine
from ml_skills.safety.quoting import DEFAULT_MAX_CHARS, fence, new_marker

PathArg = Annotated[str, Field(min_length=1, max_length=4096, description="Log file, absolute or relative to the first allowed root.")]
MaxChars = Annotated[int, Field(ge=1000, le=200_000, description="Cap on the returned text; the newest lines are kept.")]


class LogText(ToolResult):
    source: str = Field(description="The resolved file that was read.")
    first_line: int | None = Field(None, description="1-based line number of the first line returned, when known.")
    line_count: int = Field(0, description="Lines returned.")
    text: str = Field("", description="The lines, fenced as quoted data between this call's markers.")


class GrepResult(LogText):
    pattern: str
    total_matches: int = Field(0, description="Matching lines in the whole file (more than returned when capped).")
    match_lines: list[int] = Field(default_factory=list, description="1-based line numbers of the returned matches.")


def _open(path: str) -> Path:
    p = confine(path, roots())
    why = logfile.looks_binary(p)
    if why:
        raise UnreadableInput(f"{p} is not a text log: {why}")
    return p


def _result(cls: type[LogText], src: str, lines: list[str], first: int | None, max_chars: int, cut: bool = False, **kw: object) -> LogText:
    marker = new_marker()
    f = fence(lines, marker=marker, max_chars=max_chars, label=src)
    skipped = len(lines) - f.lines
    status = EvidenceStatus.NO_DATA if not lines else EvidenceStatus.OK
    return cls(status=status, truncated=f.truncated or cut, redactions=f.redactions, stripped_chars=f.stripped, marker=marker,
               source=src, first_line=(first + skipped) if first is not None else None, line_count=f.lines, text=f.text, **kw)


@tool(title="Read the end of a log")
def read_log_tail(
    path: PathArg,
    lines: Annotated[int, Field(ge=1, le=5000, description="How many of the last lines to return.")] = 200,
    max_chars: MaxChars = DEFAULT_MAX_CHARS,
) -> LogText:
    """Return the last lines of a training log, redacted, size-capped and fenced as quoted data.

    Start here: a failed run's cause is usually in its last lines. Cost depends on `lines`, not
    on the file size.
    """
    p = _open(path)
    got, cut = logfile.tail(p, lines)
    return _result(LogText, str(p), got, None, max_chars, cut)


@tool(title="Read lines around a line number")
def read_log_window(
    path: PathArg,
    line: Annotated[int, Field(ge=1, le=10**10, description="1-based line number to centre on (from scan_log or grep_log).")],
    before: Annotated[int, Field(ge=0, le=500, description="Lines before it.")] = 20,
    after: Annotated[int, Field(ge=0, le=500, description="Lines after it.")] = 20,
    max_chars: MaxChars = DEFAULT_MAX_CHARS,
) -> LogText:
    """Return the lines around one line of a log (e.g. a signature hit from scan_log), fenced as quoted data."""
    p = _open(path)
    first, got = logfile.window(p, line, before, after)
    res = _result(LogText, str(p), got, first, max_chars)
    if not got:
        res.notes.append(f"the log has fewer than {first} lines")
    return res


@tool(title="Search a log")
def grep_log(
    path: PathArg,
    pattern: Annotated[str, Field(min_length=1, max_length=300, description="Python regular expression, matched per line.")],
    context: Annotated[int, Field(ge=0, le=20, description="Lines of context before and after each match.")] = 2,
    max_matches: Annotated[int, Field(ge=1, le=500, description="Most matches returned; all are counted.")] = 50,
    ignore_case: Annotated[bool, Field(description="Match regardless of case.")] = False,
    max_chars: MaxChars = DEFAULT_MAX_CHARS,
) -> GrepResult:
    """Find the lines of a log matching a regular expression, with context; each line is prefixed 'N: '."""
    try:
        re.compile(pattern)
    except re.error as e:
        raise InputError(f"pattern is not a valid regular expression ({e}): escape special characters such as ( [ . *") from None
    p = _open(path)
    blocks, total = logfile.grep(p, pattern, context, max_matches, ignore_case)
    rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    out: list[str] = []
    hits: list[int] = []
    for first, block in blocks:
        if out:
            out.append("--")
        for i, text in enumerate(block, start=first):
            out.append(f"{i}: {text}")
            if rx.search(text):
                hits.append(i)
    res = _result(GrepResult, str(p), out, None, max_chars, total > len(blocks), pattern=pattern, total_matches=total, match_lines=hits[:max_matches * 4])
    if total == 0:
        res.status = EvidenceStatus.NO_DATA
    return res


TOOLS = [read_log_tail, read_log_window, grep_log]
