"""Log reading tools: the tail, a window around a line, a bounded grep. Thin over collectors/logfile."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import Field

from ml_skills.collectors import logfile
from ml_skills.errors import UnreadableInput
from ml_skills.mcp_tools.common import ToolResult, counted, roots, tool
from ml_skills.models import EvidenceStatus
from ml_skills.safety.paths import confine
from ml_skills.safety.quoting import DEFAULT_MAX_CHARS, fence, name_or_quoted, new_marker
from ml_skills.safety.redact import as_shown, may_hide, named_above, redact_line_after
from ml_skills.safety.regex import LinePattern

PathArg = Annotated[str, Field(min_length=1, max_length=4096, description="Log file, absolute or relative to the first allowed root.")]
MaxChars = Annotated[int, Field(ge=1000, le=200_000, description="Cap on the returned text; the newest lines are kept.")]


class LogText(ToolResult):
    source: str = Field(description="The resolved file that was read.")
    first_line: int | None = Field(None, description="1-based line number of the first line returned, when known.")
    line_count: int = Field(0, description="Lines returned.")
    text: str = Field("", description="The lines, fenced as quoted data between this call's markers.")
    changed: bool = Field(False, description="The file grew, was truncated or rotated while it was read: the answer is partial.")


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


R = TypeVar("R", bound="LogText")
T = TypeVar("T")


def _watched(p: Path, read: Callable[[], T]) -> tuple[T, int, int, bool]:
    """counted(read), and whether the file changed while it was read (logfile.identity). Seventy-third round: scan_log
    flagged a log truncated mid-read, grep_log and read_log_window answered `ok` with half the matches."""
    before = logfile.identity(p)
    out, gone, red = counted(read)
    return out, gone, red, before is None or logfile.identity(p) != before


def _flag_if_changed(res: R, changed: bool) -> R:
    if changed:
        res.changed = True
        res.status = EvidenceStatus.PARTIAL
        res.notes.append("the log changed while it was read (grew, was truncated or rotated): this answer covers what was "
                         "read; read it again once the run stops writing")
    return res


def _result(cls: type[R], src: str, lines: list[str], first: int | None, max_chars: int, cut: bool = False,
            read: tuple[int, int] = (0, 0), **kw: object) -> R:
    """The answer of a log tool; `read` is (stripped, redacted) while its lines were read and judged (`counted`)."""
    marker = new_marker()
    f = fence(lines, marker=marker, max_chars=max_chars, label=src)
    skipped = len(lines) - f.lines
    status = EvidenceStatus.NO_DATA if not lines else EvidenceStatus.OK
    return cls(status=status, truncated=f.truncated or cut, redactions=f.redactions + read[1], stripped_chars=f.stripped + read[0], marker=marker,
               source=name_or_quoted(src, marker), first_line=(first + skipped) if first is not None else None, line_count=f.lines, text=f.text, **kw)  # type: ignore[arg-type]


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
    (got, cut), gone, red, changed = _watched(p, lambda: logfile.tail(p, lines))
    return _flag_if_changed(_result(LogText, str(p), got, None, max_chars, cut, read=(gone, red)), changed)


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
    (first, got), gone, red, changed = _watched(p, lambda: logfile.window(p, line, before, after))
    res = _result(LogText, str(p), got, first, max_chars, read=(gone, red))
    if not got:
        res.notes.append(f"the log has fewer than {first} lines")
    return _flag_if_changed(res, changed)


class _ShownLines:
    """A caller's pattern matched against each line as it would be shown (redacted), never the raw
    line: otherwise match counts spell out a secret one character at a time (`api-key g`, `api-key gh`, ...).

    Whether a line is redacted for the match never depends on the raw line matching: redacting only the lines the
    raw pattern matched made a right guess of a secret's next characters cost a redaction per line and a wrong one
    nothing, and over a log repeating the secret the right guess hit the tool's deadline while a wrong one answered
    (ninth round). Every line that could hide a secret (redact.may_hide) is judged as shown; the rest, shown as they
    are, are matched raw."""

    def __init__(self, rx: LinePattern) -> None:
        self.rx = rx
        self.note = rx.note

    def _match(self, text: str, hide: bool, shown: Callable[[], str]) -> bool:
        raw = bool(self.rx.search(text))
        if not hide:
            return raw
        judged = bool(self.rx.search(shown()))  # paid whatever the raw line gave
        return raw and judged

    def search(self, text: str) -> bool:
        return self._match(text, may_hide(text), lambda: as_shown(text))

    def search_after(self, prior: list[str], text: str) -> bool:
        """search() for a line whose secret's name may sit on the lines above it (W&B config.yaml's `value:` line)."""
        hide = may_hide(text) or named_above(prior, text)  # redact_line_after's own gate
        return self._match(text, hide, lambda: as_shown(redact_line_after(prior, text, count=False)))


@tool(title="Search a log")
def grep_log(
    path: PathArg,
    pattern: Annotated[str, Field(min_length=1, max_length=300, description="Regular expression matched per line (no back-references or look-arounds).")],
    context: Annotated[int, Field(ge=0, le=20, description="Lines of context before and after each match.")] = 2,
    max_matches: Annotated[int, Field(ge=1, le=500, description="Most matches returned; all are counted.")] = 50,
    ignore_case: Annotated[bool, Field(description="Match regardless of case.")] = False,
    max_chars: MaxChars = DEFAULT_MAX_CHARS,
) -> GrepResult:
    """Find the lines of a log matching a regular expression, with context; each line is prefixed 'N: '."""
    rx = _ShownLines(LinePattern(pattern, ignore_case))
    p = _open(path)
    (blocks, total), gone, red, changed = _watched(p, lambda: logfile.grep(p, rx, context, max_matches))
    out: list[str] = []
    hits: list[int] = []
    for first, block in blocks:
        if out:
            out.append("--")
        for i, text in enumerate(block, start=first):
            out.append(f"{i}: {text}")
            if rx.search(text):
                hits.append(i)
    res = _result(GrepResult, str(p), out, None, max_chars, total > len(blocks), read=(gone, red), pattern=pattern, total_matches=total, match_lines=hits[:max_matches * 4])
    if total == 0:
        res.status = EvidenceStatus.NO_DATA
    if rx.note:
        res.notes.append(rx.note)
    return _flag_if_changed(res, changed)


TOOLS = [read_log_tail, read_log_window, grep_log]
