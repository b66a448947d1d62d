"""Small TOML files the CLI reads on every run (the shipped policy), parsed once and kept as JSON.

Importing `tomllib` (its parser and the regular expressions it compiles at import) costs about 3 ms of a 0.3 s run on
an everyday log, for a file that does not change between runs. The parsed data is kept in a sealed file of the cache
directory (diskcache.py) named by a hash of the text, as the parsed catalog is: an edited file is parsed
again; data JSON cannot hold exactly (dates) is never kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json

from ml_skills import diskcache

MAGIC = b"MLSKTOML1\n"
KEEP = 8  # parsed files kept (one per text met)


def parsed(text: str) -> dict:
    """`tomllib.loads(text)`, from the cache when this text was parsed before; a bad text raises as tomllib does."""
    key = hashlib.sha256(MAGIC + text.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    path = diskcache.cache_dir() / f"toml-{key}.json"
    data = diskcache.read_json(path, key, MAGIC)
    if isinstance(data, dict):
        return data
    import tomllib  # only when the cache cannot answer

    data = tomllib.loads(text)
    with contextlib.suppress(TypeError, ValueError):  # a date, or a float JSON cannot spell: not kept
        blob = json.dumps(data, allow_nan=False).encode()
        if json.loads(blob) == data:
            diskcache.write(path, key, blob, MAGIC, KEEP)
    return data
