"""Compiled Hyperscan databases, cached on disk between processes.

Compiling the catalog's databases costs about half a second, which is most of a one-shot CLI run
on an everyday log. A database depends only on its patterns, ids, flags, the Hyperscan version and
the machine, so it is serialized once into the user's cache directory (`ML_SKILLS_CACHE`, else
`$XDG_CACHE_HOME/ml-skills`, else `~/.cache/ml-skills`) under a name that hashes all of those.

The cache can only ever make a run faster: a missing, read-only or foreign cache directory, a
file that is truncated, corrupt, written by another Hyperscan build or for another CPU is detected
(our own SHA-256 over the payload, then Hyperscan's own platform and version checks) and the
database is compiled as before, then written back when the directory allows it. A cache file is
only trusted when it is a regular file owned by this user and writable by no one else.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MAGIC = b"MLSKHS1\n"
_DIGEST = 32
KEEP = 256  # files kept: the grad-norm threshold compiles one small database per level seen


def cache_dir() -> Path:
    """Where compiled databases live; nothing is created here until a database is written."""
    env = os.environ.get("ML_SKILLS_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg if xdg else Path.home() / ".cache") / "ml-skills"


def cache_key(hs: Any, expressions: Sequence[bytes], ids: Sequence[int], flags: Sequence[int], mode: int) -> str:
    """A name that changes whenever anything the compiled database depends on changes."""
    h = hashlib.sha256()
    for part in (getattr(hs, "__version__", "?"), platform.machine(), platform.system(), str(mode)):
        h.update(part.encode() + b"\0")
    for e, i, f in zip(expressions, ids, flags, strict=True):
        h.update(len(e).to_bytes(4, "little") + e + i.to_bytes(4, "little") + f.to_bytes(4, "little"))
    return h.hexdigest()[:40]


def _trusted(fd: int) -> bool:
    st = os.fstat(fd)
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _seal(key: str, payload: bytes) -> bytes:
    """The digest binds the payload to its key: a file renamed to another key's name is refused."""
    return hashlib.sha256(key.encode() + b"\0" + payload).digest()


def _read(path: Path, key: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not _trusted(fd):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(64 * 1024 * 1024 + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _DIGEST:
        return None
    digest, payload = data[len(MAGIC) : len(MAGIC) + _DIGEST], data[len(MAGIC) + _DIGEST :]
    return payload if _seal(key, payload) == digest else None


def _write(path: Path, key: str, payload: bytes) -> None:
    """Write atomically (a reader never sees half a file); any failure leaves the cache as it was."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".hs-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + _seal(key, payload) + payload)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _prune(path.parent)
    except OSError:
        pass


def _prune(directory: Path) -> None:
    """Keep the cache bounded: drop the least recently written databases beyond KEEP."""
    files = sorted(directory.glob("hs-*.db"), key=lambda f: f.stat().st_mtime, reverse=True)
    for f in files[KEEP:]:
        f.unlink(missing_ok=True)


def compiled(hs: Any, expressions: Sequence[bytes], ids: Sequence[int], flags: Sequence[int], mode: int) -> Any:
    """The Hyperscan database for these patterns: loaded from the cache, or compiled (and cached)."""
    key = cache_key(hs, expressions, ids, flags, mode)
    path = cache_dir() / f"hs-{key}.db"
    payload = _read(path, key)
    if payload is not None:
        with contextlib.suppress(Exception):  # a foreign or damaged database: compile instead
            return hs.loadb(payload, mode)
    db = hs.Database(mode=mode)
    db.compile(expressions=list(expressions), ids=list(ids), elements=len(expressions), flags=list(flags))
    with contextlib.suppress(Exception):  # serializing is an optimisation; never fail a scan for it
        _write(path, key, hs.dumpb(db))
    return db
