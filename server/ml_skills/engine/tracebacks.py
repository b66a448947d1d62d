"""Parse Python tracebacks out of log text, whatever prefix each line carries.

Real logs prefix traceback lines with `[rank0]: `, `(TaskRunner pid=1) `, timestamps or ANSI
colour codes. The prefix is whatever stands before `Traceback (most recent call last):`, and
the following lines of the same traceback carry it too. A DataLoader worker's error is re-raised
with its `Original Traceback` inside the message; that inner traceback is parsed as its own
event, since it is the one that names the failing sample code.
"""

from __future__ import annotations

import re

from ml_skills.models import TracebackEvent

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_START = re.compile(r"(Original )?Traceback \(most recent call last\):")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_EXC = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:\([\w.]+\))?)(?::\s?(?P<msg>.*))?$"
)
_EXC_NAME = re.compile(
    r"(Error|Exception|Interrupt|Exit|Failure|Fault|Timeout|Denied|Forbidden|Exhausted|NotFound|"
    r"Precondition|Iteration|Unauthorized|Unauthenticated|Aborted|Unavailable|Cancelled|"
    # C extension modules name their exceptions in lower case: struct.error, zlib.error, cv2.error, socket.timeout
    r"\w\.error|\w\.timeout)(\([\w.]+\))?$"
)
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
IGNORED = "Exception ignored in"
_MAX_LINES = 400


def _strip(line: str, prefix: str) -> str | None:
    line = ANSI.sub("", line)
    if prefix and line.startswith(prefix):
        return line[len(prefix) :]
    if not prefix:
        return line
    # Prefix changed (another rank's line interleaved): compare without digits/pids.
    return None


def parse_at(lines: list[str], first_line_no: int, source: str, chained: bool = False) -> TracebackEvent | None:
    """Parse one traceback whose start line is lines[0]; None if it does not end in an exception line."""
    head = ANSI.sub("", lines[0])
    m = _START.search(head)
    if not m:
        return None
    prefix = head[: m.start()]
    if prefix:
        # A traceback inside an exception message ("FileNotFoundError: Traceback (most ...") has
        # no line prefix: the lines after it start at column 0. Decide from the next frame line.
        for raw in lines[1:6]:
            plain = ANSI.sub("", raw)
            if plain.strip():
                if not plain.startswith(prefix):
                    prefix = ""
                break
    frames: list[str] = []
    code_lines: list[str] = []
    foreign = 0
    for offset, raw in enumerate(lines[1:_MAX_LINES], start=1):
        body = _strip(raw, prefix)
        if body is None:
            foreign += 1
            if foreign > 50:
                return None
            continue
        fm = _FRAME.match(body)
        if fm:
            frames.append(f"{fm['file']}:{fm['func']}")
            continue
        if body.startswith((" ", "\t")) or not body.strip():
            if body.strip() and frames:
                code_lines.append(body.strip())
            continue
        if body.startswith(("^", "~")):
            continue
        em = _EXC.match(body.strip())
        if em and frames and _EXC_NAME.search(em["type"]):
            exc_type = em["type"]
            message = (em["msg"] or "").strip()
            return TracebackEvent(
                source=source,
                line_no=first_line_no + offset,
                start_line=first_line_no,
                exc_type=exc_type,
                message=message[:500],
                frames=[*frames[-12:], *(f"  {c}" for c in code_lines[-12:])],
                chained=chained or bool(m.group(1)),
            )
        if body.strip().startswith(_CHAIN):
            continue
        # Something else (e.g. a multi-line message or noise); keep looking a little.
    return None


_INDENTED_FRAME = re.compile(r'  File "[^"]+", line \d+, in \S+')
HEADLESS_LINES = 60  # how far into a log a cut-off traceback's first frame may sit


def is_frame(line: str) -> bool:
    return bool(_INDENTED_FRAME.search(ANSI.sub("", line)))


def parse_headless(lines: list[str], first_line_no: int, source: str) -> TracebackEvent | None:
    """A traceback whose header was cut off: a pasted excerpt or `tail -n` that starts among its frames.

    lines[0] is the first frame line; its text before the two-space frame indent is the prefix
    the missing `Traceback (most recent call last):` line would have carried.
    """
    head = ANSI.sub("", lines[0]) if lines else ""
    m = _INDENTED_FRAME.search(head)
    if not m:
        return None
    ev = parse_at([head[: m.start()] + "Traceback (most recent call last):", *lines], first_line_no - 1, source)
    return ev.model_copy(update={"start_line": first_line_no}) if ev is not None else None


def is_chain_marker(line: str) -> bool:
    return any(marker in line for marker in _CHAIN)
