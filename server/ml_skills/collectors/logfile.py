"""Read a log file without ever loading it whole: tail from the end, windows, chunks, grep.

Every reader opens the file read-only through safety/paths.open_binary (confined to the roots,
no symlink followed on the way, non-blocking open, S_ISREG checked on the fd: a FIFO swapped in
is refused, never waited on), caps line length for output, and decodes bytes with replacement
so invalid UTF-8 never raises. Every read is bounded: windows and grep stream lines in chunks
and keep at most MAX_LINE_BYTES of any one line, so a 5 GB line costs a chunk of memory.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from ml_skills import calltime
from ml_skills.errors import InputError, TargetNotFound, UnreadableInput
from ml_skills.safety.paths import contain, open_binary, walk
from ml_skills.safety.redact import PRIOR_LINES, redact_after, redact_line_after

CHUNK = 4 * 1024 * 1024


class Searcher(Protocol):
    def search(self, text: str, /) -> object: ...


MAX_LINE_CHARS = 2000
MAX_LINE_BYTES = 64 * 1024  # of one line kept by window() and grep(): display cuts at MAX_LINE_CHARS anyway
_SNIFF = 8192


def identity(p: Path, st: os.stat_result | None = None) -> tuple[int, int, int, int] | None:
    """What changes when a log grows, is truncated or is rotated (inode, device, size, mtime); None when it cannot be
    stat'ed. Taken before and after a read: a log that changed meanwhile is flagged, not trusted whole."""
    try:
        st = st or p.stat()
    except OSError:
        return None
    return st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns


def check_readable(path: str | os.PathLike[str]) -> Path:
    """Return the path if it is a regular, readable file; raise a clear error otherwise."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        # the path as given: Path() folds `//`, and a URL in it lost the `://` redaction needs (thirteenth round)
        raise TargetNotFound(f"no file at {os.fspath(path)}: check the path (relative paths start from {Path.cwd()})") from None
    except PermissionError:
        raise UnreadableInput(f"{p} cannot be read: permission denied") from None
    except OSError as e:
        raise UnreadableInput(f"{p} cannot be read: {e.strerror or e}") from None
    contain(p, "any")  # resolved: kernel trees refused, and inside the active roots
    if stat.S_ISDIR(st.st_mode):
        raise UnreadableInput(f"{p} is a directory; pass it as an artifact directory, not a log")
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableInput(f"{p} is not a regular file (FIFO, socket or device); only regular files are read")
    if not os.access(p, os.R_OK):
        raise UnreadableInput(f"{p} cannot be read: permission denied")
    return p


OWN_REPORT = "check-failed-run.json"  # render.json_report.FILENAME (collectors do not import the renderers)


def siblings(path: Path, limit: int = 50) -> int:
    """How many other entries the log's folder holds (at most `limit`): 0 when the folder is outside
    the allowed roots or unreadable. Only a count: the plan asks for the run directory only when
    there is something beside the log to read. The report this tool wrote there on an earlier run is not the run's."""
    try:
        for _d, dirnames, filenames in walk(path.resolve().parent, max_depth=1):
            return min(limit, len(dirnames) + len([f for f in filenames if f != OWN_REPORT]) - 1)
    except (InputError, OSError):
        return 0
    return 0


def looks_binary(path: Path) -> str | None:
    """Return why the file is not a text log (compressed, NUL bytes), or None if it looks like text."""
    with open_binary(path) as f:
        head = f.read(_SNIFF)
    if head[:2] == b"\x1f\x8b":
        return "gzip-compressed: decompress it first (zcat FILE > train.log)"
    if head[:4] in (b"PK\x03\x04",) or head[:6] == b"\xfd7zXZ\x00" or head[:3] == b"BZh":
        return "an archive or compressed file, not a text log"
    if not head:
        return None
    nul = head.count(b"\x00")
    if nul > len(head) // 100 + 1:
        return f"binary data ({nul} NUL bytes in the first {len(head)} bytes)"
    return None


def decode(raw: bytes | bytearray) -> str:
    """Bytes of one line to display text: invalid UTF-8 replaced, tqdm's \\r frames reduced to the last."""
    return _display(raw.decode("utf-8", errors="replace").rstrip("\r\n"))


CUT_CONTEXT = 16 * 1024
"""Bytes read before a piece of a line whose start was cut off, to judge it by (longer than any secret a pattern takes)."""
_CUT_HEAD = 4 * MAX_LINE_CHARS + CUT_CONTEXT


def decode_cut(before: bytes, piece: bytes | bytearray) -> str:
    """A line whose start a byte cap cut off: redacted with the bytes before the cut as context, then shown like any line.

    The part not shown may hold the keyword (`AWS_SECRET_ACCESS_KEY=`) and the part shown its value;
    redacting the piece alone would miss it (safety/redact.py, redact_after). The leading '…' says
    the start is missing.
    """
    head = piece[:_CUT_HEAD].decode("utf-8", errors="replace").rstrip("\r\n")  # more than _display ever shows
    return "…" + _display(redact_after(before.decode("utf-8", errors="replace"), head))


def _token_tail(head: str, most: int = 400) -> int:
    """Length of the run of non-space characters that ends `head`, at most `most`: what `\\S{1,400}$` matched, counted
    from the end (the search tried every start of a long run and read up to 400 characters from each: 6.6 s for 1,200
    lines of 4,000 letters)."""
    end = len(head) - 1 if head.endswith("\n") else len(head)  # '$' also matches before a final newline
    n = 0
    while n < most and n < end and not head[end - 1 - n].isspace():
        n += 1
    return len(head) - (end - n) if n else 0


def _display(text: str) -> str:
    if "\r" in text:
        frames = [f for f in text.split("\r") if f.strip()]
        text = frames[-1] if frames else ""
    if len(text) > MAX_LINE_CHARS:
        head = text[: MAX_LINE_CHARS - 40]
        if not text[len(head)].isspace():  # never show the first half of a token the cut went through
            head = head[: len(head) - _token_tail(head)]
        text = head + f" …[{len(text) - len(head)} more chars]"
    return text


def iter_chunks(path: Path, size: int = CHUNK, limit: int | None = None, start: int = 0) -> Iterator[tuple[int, bytearray]]:
    """Yield (byte offset, chunk) where each chunk ends at a newline (or at EOF, or at `limit`).

    The chunk is one reused buffer, valid until the next is read: reading into it avoids
    allocating (and page-faulting) a fresh 4 MiB object per chunk. The partial last line is
    dropped and read again with the next chunk. A line longer than a chunk is cut at the chunk
    boundary so memory stays bounded. With `limit`, at most that many bytes are read: a log that
    grows faster than it is read still ends. `start` begins at that byte: one of chunk_starts' offsets
    yields the very chunks a pass from 0 yields from there on (a worker of a parallel pass).
    """
    buf = bytearray(size)
    with open_binary(path, buffering=0) as f:
        offset = start
        f.seek(start)
        while True:
            want = size if limit is None else min(size, limit - offset)
            if want <= 0:
                return
            if len(buf) < want:
                buf.extend(bytes(want - len(buf)))  # back to full size (only a partial line was cut)
            elif len(buf) > want:
                del buf[want:]
            n = f.readinto(buf)
            if n < want or (limit is not None and offset + n >= limit):
                if n:
                    del buf[n:]
                    calltime.check()
                    yield offset, buf
                return
            cut = buf.rfind(b"\n")
            if 0 <= cut < want - 1:
                del buf[cut + 1 :]
                f.seek(offset + cut + 1)
            calltime.check()  # a tool call answered 'did not finish' stops reading here, not at the end of the file
            yield offset, buf
            offset += len(buf)


def chunk_starts(path: Path, limit: int, size: int = CHUNK, back: int = 64 * 1024) -> list[int]:
    """The byte offset of every chunk iter_chunks(path, size, limit) yields, without reading the chunks:
    each boundary is found by reading back from the end of its window to the last newline (a few KB,
    the whole window only when one line fills it)."""
    starts = [0]
    with open_binary(path, buffering=0) as f:
        b = 0
        while b + size < limit:
            end, cut = b + size, -1
            while cut < 0 and end > b:
                lo = max(b, end - back)
                f.seek(lo)
                block = f.read(end - lo)
                if len(block) < end - lo:
                    return starts  # the file shrank under us: the pass itself will see and flag it
                k = block.rfind(b"\n")
                cut = lo + k if k >= 0 else -1
                end = lo
            b = cut + 1 if cut >= 0 else b + size
            starts.append(b)
    return starts


def tail(path: Path, n: int, max_bytes: int = 8 * 1024 * 1024, end: int | None = None) -> tuple[list[str], bool]:
    """Last n lines by reading backwards from the end: cost depends on n, not on file size.

    `end` reads back from that byte instead of the file's current end: a pass that counted lines
    up to the size the log had when it started must take its tail from there too, or a log still
    being written gets line numbers short by what was appended meanwhile.
    Returns the lines and whether the byte cap cut the tail short.
    """
    if n <= 0:
        return [], False
    with open_binary(path) as f:
        size = f.seek(0, os.SEEK_END)
        end = size if end is None else min(end, size)
        pos = end
        buf = b""
        block = 64 * 1024
        while pos > 0 and buf.count(b"\n") <= n + PRIOR_LINES and end - pos < max_bytes:  # and the lines above the tail
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            buf = f.read(step) + buf
            block = min(block * 2, 4 * 1024 * 1024)
    truncated = pos > 0 and buf.count(b"\n") <= n
    lines = buf.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if pos > 0 and not truncated:
        lines = lines[1:]  # first piece is a partial line
    out = [decode(x) for x in lines[-n:]]
    out = judged([decode(x) for x in lines[-n - PRIOR_LINES:-n]] if len(lines) > n else [], out)
    if truncated and lines and len(lines) <= n:  # the first piece starts mid-line: judge it with what came before
        with open(path, "rb") as f:
            f.seek(max(0, pos - CUT_CONTEXT))
            before = f.read(pos - max(0, pos - CUT_CONTEXT))
        out[0] = decode_cut(before, lines[0])
    return out, truncated


def window_at(path: Path, offset: int, before: int, after: int) -> tuple[int, list[str]]:
    """Lines around the line that starts at byte `offset`: returns (index of that line in the list, lines)."""
    with open_binary(path) as f:
        back = min(offset, 256 * 1024)
        f.seek(offset - back)
        head = f.read(back)
        tail_bytes = f.read(256 * 1024)
    return _split_window(head, tail_bytes, offset - back > 0, before, after)


def window_in(data: bytes, offset: int, before: int, after: int) -> tuple[int, list[str]]:
    """window_at for bytes held in memory."""
    back = min(offset, 256 * 1024)
    return _split_window(data[offset - back : offset], data[offset : offset + 256 * 1024], offset - back > 0, before, after)


def _split_window(head: bytes, tail_bytes: bytes, cut_head: bool, before: int, after: int) -> tuple[int, list[str]]:
    # only the lines used below are split off the two 256 KiB reads (they hold thousands of lines): the last
    # `before + PRIOR_LINES` whole lines above the offset, the first `after + 1` from it
    whole = head.rsplit(b"\n", before + PRIOR_LINES + 1)
    start = whole.pop()  # b"" when the offset starts a line; else the part of its line before the offset
    start_known = bool(whole) or not cut_head
    if cut_head and whole:
        whole = whole[1:]
    prev = whole[-before:] if before else []
    above = [decode(x) for x in whole[: len(whole) - len(prev)][-PRIOR_LINES:]]  # judged with the window's first lines
    nxt = tail_bytes.split(b"\n", after + 1)[: after + 1]
    if nxt and nxt[-1] == b"" and len(nxt) > 1:
        nxt.pop()
    if start and nxt:  # the offset is inside a line longer than a read: show it whole, or judge the cut piece by its context
        first = decode(start + nxt[0]) if start_known else decode_cut(start[-CUT_CONTEXT:], nxt[0])
        return len(prev), judged(above, [decode(x) for x in prev] + [first] + [decode(x) for x in nxt[1:]])
    return len(prev), judged(above, [decode(x) for x in prev + nxt])


def iter_lines(path: Path, max_line: int = MAX_LINE_BYTES, limit: int | None = None) -> Iterator[bytes]:
    """Every line of the file as it was when opened (of its first `limit` bytes), each cut to `max_line` bytes (the
    rest skipped).

    Built on iter_chunks, so memory stays one chunk plus one cut line whatever the file holds
    (a 5 GB line of NUL bytes in a sparse log included), and a log still growing ends.
    """
    try:
        size = os.stat(path).st_size
    except OSError:
        size = None
    carry = bytearray()  # the head of a line that continues into the next chunk
    if limit is not None:
        size = limit if size is None else min(size, limit)
    # a small file gets a buffer of its size, not a 4 MiB one: 100,000 metric files of one line each spent 5 minutes
    # zeroing buffers (tenth round)
    for _, chunk in iter_chunks(path, size=CHUNK if size is None else max(1, min(CHUNK, size)), limit=size):
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            if carry:
                room = max_line - len(carry)
                if room > 0:
                    carry += chunk[start : start + min(room, nl - start)]
                yield bytes(carry)
                carry.clear()
            else:
                yield bytes(chunk[start : min(nl, start + max_line)])
            start = nl + 1
        if start < len(chunk):
            room = max_line - len(carry)
            if room > 0:
                carry += chunk[start : start + room]
    if carry:
        yield bytes(carry)


def window(path: Path, line_no: int, before: int = 20, after: int = 20) -> tuple[int, list[str]]:
    """Lines around a 1-based line number by streaming from the start; returns (first line number, lines)."""
    first = max(1, line_no - before)
    last = line_no + after
    out: list[str] = []
    prior: deque[str] = deque(maxlen=PRIOR_LINES)  # the lines just above the window: a secret's name can sit there
    for i, raw in enumerate(iter_lines(path), start=1):
        if i >= first:
            out.append(decode(raw))
        else:
            prior.append(decode(raw))
        if i >= last:
            break
    return first, judged(list(prior), out)


def grep(
    path: Path, pattern: str | Searcher, context: int = 2, max_matches: int = 50, ignore_case: bool = False
) -> tuple[list[tuple[int, list[str]]], int]:
    """Matches of a regular expression with context: ([(first line number, lines)], total matches).

    `pattern` may be a ready matcher (safety/regex.py's LinePattern for patterns a caller wrote).
    """
    rx = pattern if not isinstance(pattern, str) else re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    before: deque[str] = deque(maxlen=context)
    blocks: list[tuple[int, list[str]]] = []
    open_block: tuple[int, list[str]] | None = None
    remaining_after = 0
    total = kept = 0
    # A searcher with search_after judges a line as shown with the lines above it (a secret's name can sit there: W&B's
    # config.yaml), and gets each block's lines as shown, judged the same way.
    search_after = getattr(rx, "search_after", None)
    recent: deque[str] = deque(maxlen=context + PRIOR_LINES + 1)  # raw lines above this one, and this one
    pre: dict[int, list[str]] = {}  # lines above each block, by its first line number
    for i, raw in enumerate(iter_lines(path), start=1):
        if not i & 4095:
            calltime.check()  # a chunk's lines can take seconds to judge: stop within a few thousand once answered
        text = decode(raw)
        prior = list(recent)[-PRIOR_LINES:]
        recent.append(text)
        if search_after(prior, text) if search_after is not None else rx.search(text):
            total += 1
            # at most max_matches matched lines are kept, however they group: a block's after-context used to take in
            # every further matching line, so a pattern matching every line kept the whole log in one block (a 24 MB log
            # in memory, then judged line by line past the call's deadline: twenty-ninth round)
            if kept < max_matches:
                kept += 1
                if open_block is not None and remaining_after:
                    open_block[1].append(text)
                else:
                    open_block = (i - len(before), [*before, text])
                    blocks.append(open_block)
                    pre[open_block[0]] = list(recent)[:-1 - len(before)][-PRIOR_LINES:]
                remaining_after = context
                before.clear()
                continue
        if open_block is not None and remaining_after:
            open_block[1].append(text)
            remaining_after -= 1
            if not remaining_after:
                open_block = None
        else:
            before.append(text)
    if search_after is not None:
        blocks = [(first, judged(pre[first], lines)) for first, lines in blocks]
    return blocks, total


def judged(prior: list[str], lines: list[str]) -> list[str]:
    """Lines of an excerpt, each judged with the lines above it (the `prior` ones first): a secret's name can sit a
    line or two above its value (W&B's config.yaml, a spec's env entry), and an excerpt is shown line by line, each
    behind its number, where no pattern sees the two together (safety/redact.py, redact_line_after)."""
    ctx = [*prior[-PRIOR_LINES:], *lines]
    off = len(ctx) - len(lines)
    return [redact_line_after(ctx[max(0, off + j - PRIOR_LINES):off + j], t) for j, t in enumerate(lines)]


def held_open_by(path: str | os.PathLike[str]) -> list[int] | None:
    """Pids of live processes (other than this one) that hold the file open, read from /proc; None where unknown.

    Read-only: it lists /proc/<pid>/fd links the caller may read (its own user's processes). A log whose last line
    is old says a process is hung only if a process is still there to hang: this is how the engine knows.
    """
    proc = Path("/proc")
    try:
        target = os.stat(path)
    except OSError:
        return None
    if not (proc / "self" / "fd").is_dir():
        return None
    me, pids = os.getpid(), []
    for entry in os.scandir(proc):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            fds = os.scandir(f"/proc/{entry.name}/fd")
        except OSError:
            continue
        with fds:
            for fd in fds:
                try:
                    st = os.stat(fd.path)
                except OSError:
                    continue
                if (st.st_ino, st.st_dev) == (target.st_ino, target.st_dev):
                    pids.append(int(entry.name))
                    break
    return pids
