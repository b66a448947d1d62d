"""A big log scanned on every core: byte ranges in forked workers, merged into one pass's evidence.

The Hyperscan binding holds the GIL while it scans (two threads took as long as one after the
other), so the cores are used by processes. A log of at least PARALLEL_BYTES
(`ML_SKILLS_PARALLEL_BYTES` overrides it) is cut into one range per core (`ML_SKILLS_SCAN_WORKERS`,
else os.cpu_count()) at the chunk boundaries a pass from byte 0 would cut (logfile.chunk_starts),
so every worker sees the very chunks the single pass sees, and only at a boundary that starts a line
(never inside a line longer than a chunk, which would be one line to two workers); this process scans the first range
while forked children scan the others, each streaming its range through one chunk buffer (memory
stays flat), and their Passes are merged in order (scanpass.py). The evidence is identical to one
process's (tests/engine/test_parallel_scan.py).

Forking is only done from a process with one thread: a thread holding a lock at the fork would
leave the child waiting for it forever. The MCP server runs tool calls in threads, so it scans in
one process, as before. A worker that fails, or whose answer cannot be read, costs its range being
scanned here instead: the parallel path can be slower, never wrong.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from bisect import bisect_left
from pathlib import Path

from ml_skills.collectors import logfile
from ml_skills.engine.read import frameworks, metric_lines
from ml_skills.engine.read.excerpts import Reader
from ml_skills.engine.read.scanpass import Pass
from ml_skills.models import Progress
from ml_skills.safety.paths import open_binary

PARALLEL_BYTES = 128 * 1024 * 1024  # below this one process is enough (a 128 MiB scan is about 0.4 s of CPU here)
_OK, _FAILED = b"K", b"F"


def _env_int(name: str) -> int | None:
    try:
        v = int(os.environ.get(name, ""))
    except ValueError:
        return None
    return v if v > 0 else None


def plan(path: Path, size: int, chunk_size: int = logfile.CHUNK, threshold: int | None = None,
         workers: int | None = None) -> list[tuple[int, int, int]] | None:
    """(first chunk number, start, end) byte ranges, one per worker; None to scan in this process."""
    threshold = threshold or _env_int("ML_SKILLS_PARALLEL_BYTES") or PARALLEL_BYTES
    n = workers or _env_int("ML_SKILLS_SCAN_WORKERS") or os.cpu_count() or 1
    if size < threshold or n < 2 or not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    starts = logfile.chunk_starts(path, size, chunk_size)
    cuts = [0]
    with open_binary(path, buffering=0) as f:
        def at_line_start(j: int) -> bool:  # not inside a line longer than a chunk
            f.seek(starts[j] - 1)
            return f.read(1) == b"\n"

        for i in range(1, n):
            j = bisect_left(starts, size * i // n)
            while j < len(starts) and not at_line_start(j):
                j += 1
            if cuts[-1] < j < len(starts):
                cuts.append(j)
    if len(cuts) < 2:
        return None
    ends = [starts[j] for j in cuts[1:]] + [size]
    return [(j, starts[j], end) for j, end in zip(cuts, ends, strict=True)]


def _scan_range(path: Path, chunk_no: int, start: int, end: int, new_pass, reader: Reader, chunk_size: int) -> Pass:  # type: ignore[no-untyped-def]
    part: Pass = new_pass()
    for k, (offset, chunk) in enumerate(logfile.iter_chunks(path, chunk_size, limit=end, start=start)):
        part.feed(chunk_no + k, offset, chunk, reader)
    return part


PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """A worker ends when the process that forked it is killed (a timeout's SIGKILL, which runs no cleanup of the
    parent's): it would otherwise scan its range to the end for nobody. Linux's parent-death signal; elsewhere, and
    if the parent is already gone, nothing is lost by stopping."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _child(w: int, path: Path, rng: tuple[int, int, int], new_pass, reader: Reader, chunk_size: int) -> None:  # type: ignore[no-untyped-def]
    status = 1
    try:
        part = _scan_range(path, *rng, new_pass, reader, chunk_size)
        data = _OK + part.to_wire()
        with os.fdopen(w, "wb") as out:
            out.write(data)
        status = 0
    except BaseException:  # noqa: BLE001 - anything: the parent scans this range itself
        with contextlib.suppress(OSError):
            os.write(w, _FAILED)
    finally:
        os._exit(status)  # never return into the parent's code, never run its atexit handlers


def run(ranges: list[tuple[int, int, int]], name: str, size: int, budget: int | None, engine: str | None,
        reader: Reader, chunk_size: int, progress: Progress | None = None) -> Pass:
    """Scan the ranges (the first here, the others in forked children) and merge them in order."""
    from ml_skills.engine.read import scan

    assert reader.path is not None
    path = reader.path

    def new_pass() -> Pass:
        return scan.new_pass(name, size, budget, engine)

    # build every pattern database before forking, so no child compiles or loads one
    new_pass()
    frameworks._matcher(engine)
    if budget is not None:
        metric_lines._eval_matcher(engine)
    children: list[tuple[int, int]] = []  # (pid, read end of its pipe)
    parent = os.getpid()
    try:
        for rng in ranges[1:]:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child; its work is checked by the merged result
                os.close(r)
                _die_with(parent)
                _child(w, path, rng, new_pass, reader, chunk_size)
            os.close(w)
            children.append((pid, r))
        part = _scan_range(path, *ranges[0], new_pass, reader, chunk_size)
        if progress is not None:
            progress(f"scanning {path.name}", ranges[0][2], size, "B")
        for (pid, r), rng in zip(children, ranges[1:], strict=True):
            with os.fdopen(r, "rb") as f:
                data = f.read()
            _, status = os.waitpid(pid, 0)
            later: Pass | None = None
            if status == 0 and data.startswith(_OK):
                with contextlib.suppress(Exception):
                    later = new_pass().from_wire(data[len(_OK):])
            if later is None:  # the worker failed: scan its range here
                later = _scan_range(path, *rng, new_pass, reader, chunk_size)
            part.merge(later)
            if progress is not None:
                progress(f"scanning {path.name}", rng[2], size, "B")
        children = []
        return part
    finally:
        for pid, r in children:  # interrupted: stop and reap the workers left
            with contextlib.suppress(OSError):
                os.close(r)
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
