"""Parse Python tracebacks out of log text, whatever prefix each line carries.

Real logs prefix traceback lines with `[rank0]: `, `(TaskRunner pid=1) `, timestamps or ANSI
colour codes. The prefix is whatever stands before `Traceback (most recent call last):`, and
the following lines of the same traceback carry it too. A DataLoader worker's error is re-raised
with its `Original Traceback` inside the message; that inner traceback is parsed as its own
event, since it is the one that names the failing sample code.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ml_skills.engine.read.levels import ERROR_WORDS, informational
from ml_skills.lazyre import lazy
from ml_skills.models import TracebackEvent
from ml_skills.safety.redact import redact, redact_cut

if TYPE_CHECKING:
    from ml_skills.engine.read.excerpts import Reader

ANSI = lazy(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_START = lazy(r"(Original )?Traceback \(most recent call last\):")
# `in <module>` pasted into a GitHub issue outside a code block loses its `<module>` (read as an
# HTML tag) and the indentation: the frame still says file and line.
FRAME = lazy(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in\b ?(?P<func>\S*)')
_EXC = lazy(
    r"^(?P<type>[A-Za-z_][\w.]*(?:\([\w.]+\))?)(?::\s?(?P<msg>.*))?$"
)
_EXC_NAME = lazy(
    r"(Error|Exception|Interrupt|Exit|Failure|Fault|Timeout|Denied|Forbidden|Exhausted|NotFound|"
    r"Precondition|Iteration|Unauthorized|Unauthenticated|Aborted|Unavailable|Cancelled|"
    # google.api_core's statuses that end in none of the above (google.api_core.exceptions.InvalidArgument: 400 ...)
    r"InvalidArgument|AlreadyExists|Conflict|BadRequest|TooManyRequests|OutOfRange|DeadlineExceeded|BadGateway|"
    # C extension modules name their exceptions in lower case: struct.error, zlib.error, cv2.error, socket.timeout
    r"\w\.error|\w\.timeout)(\([\w.]+\))?$"
)
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
# Hydra's instantiate() without HYDRA_FULL_ERROR prints no traceback, only the target it called and
# the exception's repr on the next line: "Error in call to target 'pkg.datasets.Speech':" then
# "ValueError(\"Directory ... does not exist\")". The target is the one frame there is.
HYDRA_TARGET = lazy(r"^(?:\[rank\d+\]:\s*)?Error in call to target '(?P<target>[\w.]+)':\s*$")
_REPR = lazy(r"^(?P<type>[A-Za-z_][\w.]*)\((?P<msg>.*?)\)?$")
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


def parse_hydra(lines: list[str], first_line_no: int, source: str) -> TracebackEvent | None:
    """Hydra's 'Error in call to target' report: the exception repr on the next line, the target as its frame.

    The event sits on the report's first line, so a signature on the repr line below stays its own evidence
    and is quoted as the log prints it.
    """
    m = HYDRA_TARGET.match(ANSI.sub("", lines[0]).strip())
    if not m or len(lines) < 2:
        return None
    rm = _REPR.match(ANSI.sub("", lines[1]).strip())
    if not rm or not _EXC_NAME.search(rm["type"]):
        return None
    msg = rm["msg"]
    if len(msg) >= 2 and msg[0] == msg[-1] and msg[0] in "'\"":
        msg = msg[1:-1]
    module, _, func = m["target"].rpartition(".")
    return TracebackEvent(
        source=source, line_no=first_line_no, start_line=first_line_no, exc_type=rm["type"],
        message=redact_cut(msg, 500), frames=[f"{module.replace('.', '/')}.py:{func}"], chained=False,
    )


# the line above a traceback that names its exception first, as a framework's error handler logs it before the stack:
# Optuna's 'Trial 41 failed because of the following error: ValueError("Input contains NaN ...")', a logger's
# 'An exception has been raised[ValueError: No valid experiment ...'
_ANNOUNCED = lazy(r"\b(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))(?:\((?P<q>[\"'])(?P<m1>.+?)(?P=q)\)|: (?P<m2>\S.*))")


def announced(line: str) -> tuple[str, str] | None:
    """(type, message) of an exception named with its message on the line above a traceback, else None."""
    plain = ANSI.sub("", line).strip()
    if _EXC.match(plain):
        return None  # the last line of the traceback before this one (another rank's, a first attempt's), not a herald
    m = _ANNOUNCED.search(plain)
    return None if m is None else (m["type"], (m["m1"] or m["m2"] or "").strip())


def parse_at(lines: list[str], first_line_no: int, source: str, chained: bool = False,
             above: str | None = None) -> TracebackEvent | None:
    """Parse one traceback whose start line is lines[0]; None if it does not end in an exception line.

    `above`, the line before it: when the stack is cut before its exception line (the log ends inside it) and that
    line named the exception with its message, the traceback is read as ending in that exception, cited there."""
    if lines and HYDRA_TARGET.match(ANSI.sub("", lines[0]).strip()):
        return parse_hydra(lines, first_line_no, source)
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
        if body.startswith(" ") and not body.startswith("  "):
            # Python indents frames by two spaces and their code by four: one space is a paste's, such as the
            # '> ' of a log quoted in an issue whose frame lines kept one space less ('>  File', '> KeyError: 3')
            body = body[1:]
        fm = FRAME.match(body)
        if fm:
            frames.append(f"{fm['file']}:{fm['func'] or '?'}")
            continue
        if body.startswith((" ", "\t")) or not body.strip():
            # (Python 3.11's carets under the failing expression mark a column, they are no code)
            if body.strip() and frames and body.strip().strip("^~"):
                code_lines.append(body.strip())
            continue
        if body.startswith(("^", "~")):
            continue
        em = _EXC.match(body.strip())
        if em and frames and _EXC_NAME.search(em["type"]):
            if _REMOTE_WRAPPER.match(em["type"]) and _frame_next(lines, offset, prefix):
                continue  # Ray's RayTaskError(X): the remote task's own frames follow, then X itself
            exc_type = em["type"]
            message = (em["msg"] or "").strip()
            return TracebackEvent(
                source=source,
                line_no=first_line_no + offset,
                start_line=first_line_no,
                exc_type=exc_type,
                message=redact_cut(message, 500),
                frames=[*frames[-12:], *(f"  {c}" for c in code_lines[-12:])],
                chained=chained or bool(m.group(1)),
            )
        if body.strip().startswith(_CHAIN):
            continue
        # Something else (e.g. a multi-line message or noise); keep looking a little.
    told = announced(above) if above is not None and frames and len(lines) < _MAX_LINES else None
    if told is None:
        return None
    return TracebackEvent(source=source, line_no=first_line_no - 1, start_line=first_line_no - 1, exc_type=told[0],
                          message=redact_cut(told[1], 500), frames=[*frames[-12:], *(f"  {c}" for c in code_lines[-12:])],
                          chained=chained or bool(m.group(1)))


# An exception that wraps another raised in a remote task and prints that task's traceback right below itself
_REMOTE_WRAPPER = lazy(r"^(?:[\w.]+\.)?RayTaskError\([\w.]+\)$")


def _frame_next(lines: list[str], offset: int, prefix: str) -> bool:
    """The next line that says something, after lines[offset], is a traceback frame."""
    for raw in lines[offset + 1 : offset + 4]:
        body = _strip(raw, prefix)
        if body is not None and body.strip():
            return FRAME.match(body) is not None
    return False


_SIGINT = lazy(r"\bgot signal: 2\b")


def interrupted(exc_type: str, message: str) -> bool:
    """A person's Ctrl-C: Python's KeyboardInterrupt, or torchrun's elastic agent raising SIGINT as its SignalException
    ('Process 1840858 got signal: 2'). Raised wherever the process waited: its frames say where, not what failed."""
    short = exc_type.rsplit(".", 1)[-1]
    return short == "KeyboardInterrupt" or (short == "SignalException" and _SIGINT.search(message) is not None)


# Indented as Python prints it, or at column 0 when a paste lost its indentation.
_INDENTED_FRAME = lazy(r'(?:^|  )File "[^"]+", line \d+, in\b')
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


def read_headless(reader: Reader, name: str) -> TracebackEvent | None:
    """The log starts inside a traceback (an excerpt, `tail -n`): parse it from its first frame. A paste that starts
    with the exception line itself (the error first, its frames lost or left out: 'RuntimeError: ...', then what the
    run printed after it) gives that exception, with no frames."""
    _, head = reader.window_at(0, 0, HEADLESS_LINES)
    first = next((i for i, x in enumerate(head) if x.strip()), None)
    if first is not None and (m := _bare(ANSI.sub("", head[first]).strip())) is not None:
        return TracebackEvent(source=name, line_no=first + 1, start_line=first + 1, exc_type=m["type"],
                              message=redact_cut(m["msg"], 500), frames=[])
    for i, line in enumerate(head):
        if "Traceback (most recent call last)" in line:
            return None  # a header comes first: the usual pass parses it
        if is_frame(line):
            _, lines = reader.window_at(0, 0, i + 400)
            ev = parse_headless(lines[i:], i + 1, name)
            return None if ev is None else ev.model_copy(update={"message": redact(ev.message)})
    return None


def read_all(reader: Reader, name: str, starts: list[tuple[int, int]]) -> list[TracebackEvent]:
    out: list[TracebackEvent] = []
    seen_end: set[int] = set()
    for line_no, off in starts:
        _, lines = reader.window_at(off, 0, 400)
        # chained if the lines just before carry a chain marker
        _, before = reader.window_at(off, 3, 0)
        ignored = any(IGNORED in b for b in before[-2:-1])
        chained = any(is_chain_marker(b) for b in before[:-1])
        ev = parse_at(lines, line_no, name, chained=chained, above=before[-2] if len(before) >= 2 else None)
        # Python ignored it (a __del__ at shutdown), so it ended nothing; a Ctrl-C caught there still says who stopped the run
        if ev is not None and ignored and ev.exc_type != "KeyboardInterrupt":
            continue
        if ev is not None and out and _handled_when_interrupted(out[-1], ev, before):
            out.pop()
        if ev is not None and ev.line_no not in seen_end:
            seen_end.add(ev.line_no)
            out.append(ev.model_copy(update={"message": redact(ev.message)}))
    return out


_LIBRARY_FRAME = lazy(r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d[\d.]*[/\\]")
_HANDLING = "During handling of the above exception"


def _handled_when_interrupted(earlier: TracebackEvent, later: TracebackEvent, before: list[str]) -> bool:
    """A person's Ctrl-C arrived while a library was handling an exception it raised and caught itself (TensorFlow's
    tf.gather tries `params.sparse_read`, catches the AttributeError a numpy array raises, and converts): that exception
    ended nothing, the Ctrl-C did. Only when every frame of the earlier one is a library's or Python's own: an exception
    the run's code raised, being handled when the person stopped it, may be why they did."""
    frames = [f for f in earlier.frames if not f.startswith("  ")]
    return (interrupted(later.exc_type, later.message) and any(_HANDLING in b for b in before[:-1])
            and earlier.source == later.source and 0 < later.start_line - earlier.line_no <= 6
            and bool(frames) and all(_LIBRARY_FRAME.search(f) for f in frames))


# an exception line as Python prints it last: a (qualified) type ending in Error or Exception, then ': message'
_BARE_EXC = lazy(r"^(?:\[rank\d+\]:\s*)?(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))(?:\([\w.]*\))?: (?P<msg>\S.*)$")
# google.api_core's exceptions, named for the status and not '...Error', whose message opens with the HTTP code
# ('InvalidArgument: 400 Accelerator "NVIDIA_TESLA_K80" is not supported for machine type "n1-standard-4"'): the
# Vertex AI, GCS and BigQuery clients raise these, a job refused before any code ran
_BARE_API_EXC = lazy(r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:InvalidArgument|PermissionDenied|NotFound|ResourceExhausted|"
                     r"FailedPrecondition|DeadlineExceeded|ServiceUnavailable|Forbidden|Unauthenticated|Unauthorized|"
                     r"Aborted|AlreadyExists|Conflict|BadRequest|InternalServerError|TooManyRequests|GatewayTimeout|"
                     r"OutOfRange|Cancelled|BadGateway)): (?P<msg>[1-5]\d\d \S.*)$")


def _bare(text: str) -> re.Match[str] | None:
    """An exception line standing alone (escapes removed): its type and message."""
    return _BARE_EXC.match(text) or _BARE_API_EXC.match(text)


BARE_LAST = 6  # the exception line must be among the log's last lines that say something
# a logging record at ERROR level or above ('2025-04-25 12:53:29,221 - finetune - ERROR - <message>', 'ERROR:root:',
# '[ERROR]', '| CRITICAL |', glog's 'E0425'/'F0425' with its source position): the program's own report of a failure
_LOGGED_ERROR = lazy(r"(?:^|[\s\[|(:-])(?:ERROR|CRITICAL|FATAL)(?:\s*[\]|:]\s*|\s+-\s+|\s+)(?P<msg>\S.*)$"
                     r"|^[EF]\d{4} \d\d:\d\d:\d\d[.\d]*\s+\d+\s+\S+:\d+\]\s*(?P<glog>\S.*)$")
_NAMED_TYPE = lazy(r"\b(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))\b")
_RETRYING = lazy(r"(?i)\bretrying\b|\bwill retry\b|\bretry(ing)? in \d")
_STACK_ABOVE = lazy(r'^\s*File "|^\s+at |^\s*\^+\s*$|Traceback \(most recent call last\)')


# R's report of an error ('Error in py_set_attr(x, name, value) : ' and the message indented on the next line, or after the
# colon), as Rscript prints it before 'Execution halted'; reticulate's message is the Python exception's own line
_R_ERROR = lazy(r"^Error in .{1,300}? :[ \t]*+(?P<rest>.*)$")


def _r_error(tail: list[str], above: int | None, i: int) -> re.Match[str] | None:
    """A Python exception R reports (a Keras or torch model driven from R through reticulate): its line after R's
    'Error in CALL :' on the same line, or indented on the next."""
    text = ANSI.sub("", tail[i]).rstrip()
    if (head := _R_ERROR.match(text)) is not None:
        return _bare(head["rest"].strip())
    if above is not None and text.startswith("  ") and (head := _R_ERROR.match(ANSI.sub("", tail[above]).rstrip())) and not head["rest"]:
        return _bare(text.strip())
    return None


def bare_exception(tail: list[str], tail_start: int, source: str, known: list[TracebackEvent]) -> TracebackEvent | None:
    """A log that ends on an exception line with no traceback above it (a paste of the error alone; MXNet's
    'mxnet.base.MXNetError: InferShape Error ...' with its message's lines after it): that exception ended the run,
    as a traceback's final line would. None when a traceback already ends there or the line has frames above it."""
    said = [i for i, x in enumerate(tail) if x.strip()][-BARE_LAST:]
    for k, i in enumerate(said):
        m = _bare(ANSI.sub("", tail[i]).rstrip()) or _r_error(tail, said[k - 1] if k else None, i)
        if m is None:
            continue
        line_no = tail_start + i
        if any(abs(t.line_no - line_no) <= 60 for t in known) or any(_STACK_ABOVE.search(x) for x in tail[max(0, i - 3):i]):
            return None
        if any(_RETRYING.search(x) for x in tail[max(0, i - 2):]):
            return None  # 'System is retrying': an error the platform retried did not end the run by itself
        return TracebackEvent(source=source, line_no=line_no, start_line=line_no, exc_type=m["type"],
                              message=redact_cut(m["msg"], 500), frames=[])
    return _logged_error_at_end(tail, tail_start, source, known, said)


# a logging record that reports a failure: its level word, then a failure word and a colon before the message
# ('2025-06-02 22:54:12,459 - train - ERROR - Training failed: <why>'); a wrapper prints one per attempt
RECORD_HEAD = lazy(r"^.{0,120}?\b(?:ERROR|CRITICAL|FATAL)\b.{0,80}?\b(?:[Ff]ailed|[Ee]rror|[Ee]xception)\b\s*:")
_DIGIT_RUN = lazy(r"\d+")


def record_head(m: re.Match[str]) -> str:
    """A failure record's head with its digits (the time stamp's) blanked: the same record printed at another time."""
    return _DIGIT_RUN.sub("#", m.group(0))


# what a peer's or a collective's failure says: a cascade's echo of the first failure, never a new attempt
_ECHO = lazy(r"(?i)nccl|gloo|watchdog|timed? ?out|timeout|closed by peer|connection (?:reset|refused|closed)|sigterm|terminat|peer|rank")


def failed_again(lines: list[str], earlier: int, later: int) -> bool:
    """Line `later` is the failure record of line `earlier` printed again with another message, not a peer's or a
    collective's failure: the end of the program's next attempt."""
    a, b = RECORD_HEAD.match(lines[earlier]), RECORD_HEAD.match(lines[later])
    return (a is not None and b is not None and record_head(a) == record_head(b)
            and lines[earlier][a.end():].strip() != lines[later][b.end():].strip() and not _ECHO.search(lines[later][b.end():]))


# a record that announces the program's next step, whatever level it was logged at, after its logger's name if given;
# read as one only with no error's words in it ('__main__:Starting finetuning', 'Loading checkpoint shards', 'Saving the model to out/')
_PROGRESS_NOTE = lazy(r"(?i)^\W{0,3}(?:[\w.]{1,60}:\s*)?(?:start(?:ing|ed)?|begin(?:ning)?|load(?:ing|ed)|running|sav(?:ing|ed)|using|setting|training|"
                      r"initiali[sz](?:ing|ed)|prepar(?:ing|ed)|launch(?:ing|ed)|finished|done|epoch|step)\b")
_NEGATIVE = lazy(r"(?i)\b(?:not|no|cannot|can't|could not|unable|missing|invalid|unknown|unsupported|mismatch|empty|wrong|bad)\b")


def _logged_error_at_end(tail: list[str], tail_start: int, source: str, known: list[TracebackEvent],
                         said: list[int]) -> TracebackEvent | None:
    """The log's last line is an ERROR (or CRITICAL, FATAL) record of the program's own logging, and nothing else
    names a failure: the program reported why it stopped and stopped ('ERROR - loading the model failed: No package
    metadata was found for bitsandbytes'). Read as an exception of the type the message names, if any."""
    if not said:
        return None
    i = said[-1]
    m = _LOGGED_ERROR.search(ANSI.sub("", tail[i]).rstrip()[:2000])
    if m is None or any(abs(t.line_no - (tail_start + i)) <= 60 for t in known):
        return None
    msg = m["msg"] or m["glog"] or ""
    if informational(msg):
        return None  # a subprocess's INFO record relayed at ERROR (Spark's 'ERROR RabitTracker$...: ... INFO [22] train-logloss')
    if _PROGRESS_NOTE.match(msg) and not ERROR_WORDS.search(msg) and not _NEGATIVE.search(msg):
        return None  # a progress note logged at a loud level ('CRITICAL:__main__:Starting finetuning'): the run's next step, no failure
    named = _NAMED_TYPE.search(msg)
    return TracebackEvent(source=source, line_no=tail_start + i, start_line=tail_start + i,
                          exc_type=named["type"] if named else "LoggedError", message=redact_cut(msg, 500), frames=[])
