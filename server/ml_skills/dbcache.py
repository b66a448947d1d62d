"""Compiled Hyperscan databases, cached on disk between processes.

Compiling the catalog's databases costs about half a second, which is most of a one-shot CLI run
on an everyday log. A database depends only on its patterns, ids, flags, the Hyperscan version and
the machine, so it is serialized once into the user's cache directory (`ML_SKILLS_CACHE`, else
`$XDG_CACHE_HOME/ml-skills`, else `~/.cache/ml-skills`) under a name that hashes all of those.

The cache can only ever make a run faster: a missing, read-only or foreign cache directory, a
file that is truncated, corrupt, written by another Hyperscan build or for another CPU is detected
(our own SHA-256 over the payload, then Hyperscan's own platform and version checks) and the
database is compiled as before, then written back when the directory allows it. A cache file is
only trusted when it is a regular file owned by this user and writable by no one else (the sealed
files of diskcache.py).

Beside the package's parts, not in one: the engine's matchers and safety/redact.py's needle database both use it
(safety may not import the engine), and it imports nothing of the package but diskcache.
"""

from __future__ import annotations

import contextlib
import hashlib
import platform
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from ml_skills import diskcache
from ml_skills.diskcache import cache_dir

MAGIC = b"MLSKHS1\n"
KEEP = 256  # files kept: the grad-norm threshold compiles one small database per level seen

__all__ = ["NotCached", "cache_dir", "cache_key", "cached_only", "compiled"]

_CACHED_ONLY: ContextVar[bool] = ContextVar("ml_skills_dbcache_cached_only", default=False)


class NotCached(Exception):
    """Under cached_only(): this database is not in the cache (or not loadable from it), and was not compiled."""


@contextlib.contextmanager
def cached_only() -> Iterator[None]:
    """Within this block (this thread or task only), a database not loadable from the cache raises NotCached
    instead of being compiled: for a caller that has a cheaper way than compiling (scan.py's small logs)."""
    token = _CACHED_ONLY.set(True)
    try:
        yield
    finally:
        _CACHED_ONLY.reset(token)


def cache_key(hs: Any, expressions: Sequence[bytes], ids: Sequence[int], flags: Sequence[int], mode: int) -> str:
    """A name that changes whenever anything the compiled database depends on changes."""
    h = hashlib.sha256()
    for part in (getattr(hs, "__version__", "?"), platform.machine(), platform.system(), str(mode)):
        h.update(part.encode() + b"\0")
    for e, i, f in zip(expressions, ids, flags, strict=True):
        h.update(len(e).to_bytes(4, "little") + e + i.to_bytes(4, "little") + f.to_bytes(4, "little"))
    return h.hexdigest()[:40]


def compiled(hs: Any, expressions: Sequence[bytes], ids: Sequence[int], flags: Sequence[int], mode: int) -> Any:
    """The Hyperscan database for these patterns: loaded from the cache, or compiled (and cached)."""
    key = cache_key(hs, expressions, ids, flags, mode)
    path = cache_dir() / f"hs-{key}.db"
    payload = diskcache.read(path, key, MAGIC)
    if payload is not None:
        with contextlib.suppress(Exception):  # a foreign or damaged database: compile instead
            return hs.loadb(payload, mode)
    if _CACHED_ONLY.get():
        raise NotCached(key)
    db = hs.Database(mode=mode)
    db.compile(expressions=list(expressions), ids=list(ids), elements=len(expressions), flags=list(flags))
    with contextlib.suppress(Exception):  # serializing is an optimisation; never fail a scan for it
        diskcache.write(path, key, hs.dumpb(db), MAGIC, KEEP)
    return db
