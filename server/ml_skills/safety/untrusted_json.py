"""JSON from untrusted bytes (checkpoint headers, index files, tracker summaries, metric lines).

`json.loads` raises RecursionError, not ValueError, on deep nesting (`[[[[...` a few thousand
deep), and a value that parses at depth 900 still breaks every recursive consumer after it
(redaction, pydantic, the JSON report). `loads` turns every failure into ValueError and refuses
nesting deeper than MAX_DEPTH, so a caller needs one `except ValueError` and gets a value that
the rest of the program can walk.

Parsed JSON also takes far more memory than its text: each `{}` of `[{},{},...]` is a 64-byte dict for
3 bytes of text, so a 60 MiB shard index took 3 GB and a 30 MiB report planted in a run folder 1.6 GB
(eighth round). Before parsing, the values the text can hold are counted from its bytes (every value
but the first of a container follows a `,`, a `:` or a `[`; an over-count, since strings hold those
bytes too) and text that could hold more than `max_values` is refused unparsed.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # real headers, summaries and metric dicts nest 2 to 6 deep
MAX_VALUES = 2_000_000  # about 150 MB parsed at worst; a shard index of 100,000 tensors holds about 200,000


def loads(data: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES, **hooks: Any) -> Any:
    """Parse JSON; ValueError for invalid text, invalid UTF-8, nesting deeper than `max_depth`, or text that
    could hold more than `max_values` values (refused before parsing: see the module's docstring). `hooks` are json.loads'
    own (object_pairs_hook, parse_int, ...), for a format read stricter than JSON; a hook refuses by raising ValueError."""
    if value_bound(data) > max_values:
        raise ValueError(f"JSON of more than {max_values:,} values: not parsed")
    try:
        value = json.loads(data, **hooks)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {max_depth} levels") from None
    if depth_exceeds(value, max_depth):
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    return value


def value_bound(data: str | bytes | bytearray) -> int:
    """An upper bound on the number of values in JSON text, from three byte counts (no parsing)."""
    if isinstance(data, str):
        return data.count(",") + data.count(":") + data.count("[") + 1
    return data.count(b",") + data.count(b":") + data.count(b"[") + 1


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
