"""JSON from untrusted bytes (checkpoint headers, index files, tracker summaries, metric lines).

`json.loads` raises RecursionError, not ValueError, on deep nesting (`[[[[...` a few thousand
deep), and a value that parses at depth 900 still breaks every recursive consumer after it
(redaction, pydantic, the JSON report). `loads` turns every failure into ValueError and refuses
nesting deeper than MAX_DEPTH, so a caller needs one `except ValueError` and gets a value that
the rest of the program can walk.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # real headers, summaries and metric dicts nest 2 to 6 deep


def loads(data: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON; ValueError for invalid text, invalid UTF-8 or nesting deeper than `max_depth`."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {max_depth} levels") from None
    if depth_exceeds(value, max_depth):
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    return value


def depth_exceeds(value: Any, max_depth: int) -> bool:
    """True when lists and dicts nest more than `max_depth` deep; iterative, so any depth is safe to ask."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if children is None:
            continue
        if d > max_depth:
            return True
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return False
