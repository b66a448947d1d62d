"""Count newlines in a byte range: the line numbers of a streaming pass come from this.

`bytes.count` compares one byte at a time (about 1.5 GB/s here); numpy's vectorised compare into a
reused buffer is about 4x faster, which on a 1 GiB log saves half a second of CPU. Importing numpy
costs about 0.15 s, what the vector compare saves on 300 MiB: a scan imports it for a log of at
least VECTOR_LOG_BYTES (use_vectors), and any range uses it once it is imported (a running
server pays the import once). The count is the same either way.
"""

from __future__ import annotations

import threading
from typing import Any

VECTOR_MIN = 1 << 16  # below this, bytes.count is as fast as setting up the vector compare
VECTOR_LOG_BYTES = 256 << 20  # a log this large repays importing numpy in one scan
_np: Any = None
_tried = False
_local = threading.local()  # one scratch buffer per thread: the MCP server scans in worker threads


def _numpy() -> Any:
    global _np, _tried
    if not _tried:
        _tried = True
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - numpy is a dependency; the fallback stays exact
            return None
        _np = np
    return _np


def use_vectors(log_bytes: int) -> None:
    """Import numpy before scanning a log large enough to repay it."""
    if log_bytes >= VECTOR_LOG_BYTES:
        _numpy()


def count(buf: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
    """Number of b"\\n" in buf[start:end]."""
    end = len(buf) if end is None else min(end, len(buf))
    if end - start < VECTOR_MIN or (np := _np) is None:
        return buf.count(b"\n", start, end)
    n = end - start
    scratch = getattr(_local, "scratch", None)
    if scratch is None or len(scratch) < n:
        scratch = _local.scratch = np.empty(max(n, 1 << 22), dtype=np.bool_)
    view = np.frombuffer(buf, dtype=np.uint8, count=n, offset=start)  # no copy; released on return
    out = scratch[:n]
    np.equal(view, 10, out=out)
    return int(np.count_nonzero(out))
