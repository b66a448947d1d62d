"""Sealed files in the user's cache directory: what is derived from the catalog, kept between processes.

These are: the compiled Hyperscan databases (dbcache.py), the parsed catalog itself (catalog/loader.py),
the programs of the engine's regular expressions (catalog/recache.py), the shipped policy's parsed TOML
(catalog/tomlcache.py) and whether the interpreter's installed distributions hold a pydantic plugin
(catalog/plugincache.py). Each file is named by a hash of everything it was made from and starts with a magic line
and a SHA-256 that binds its payload to that name, so a truncated, corrupt or renamed file is refused; it is only
trusted when it is a regular file owned by this user and writable by no one else. Reading or writing never fails a
run: a missing, read-only or foreign directory only means deriving the data again (`ML_SKILLS_CACHE`, else
`$XDG_CACHE_HOME/ml-skills`, else `~/.cache/ml-skills`).

Beside the package's parts, not in one (it imports nothing of the package): the catalog, the engine and safety use it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
from pathlib import Path

_DIGEST = 32


def cache_dir() -> Path:
    """Where the cached files live; nothing is created here until a file is written."""
    env = os.environ.get("ML_SKILLS_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg if xdg else Path.home() / ".cache") / "ml-skills"


def _trusted(fd: int) -> bool:
    st = os.fstat(fd)
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _seal(key: str, payload: bytes) -> bytes:
    """The digest binds the payload to its key: a file renamed to another key's name is refused."""
    return hashlib.sha256(key.encode() + b"\0" + payload).digest()


def read(path: Path, key: str, magic: bytes) -> bytes | None:
    """The payload of a trusted, intact file sealed to `key`; None for anything else."""
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
    if not data.startswith(magic) or len(data) < len(magic) + _DIGEST:
        return None
    digest, payload = data[len(magic) : len(magic) + _DIGEST], data[len(magic) + _DIGEST :]
    return payload if _seal(key, payload) == digest else None


def read_json(path: Path, key: str, magic: bytes) -> object:
    """The JSON data of a trusted, intact file (`read`), or None: also for one that does not parse, or nests deeper than
    the parser recurses (a sealed payload of 200,000 `[` raised RecursionError out of the CLI's run with a traceback before
    the twenty-third round; a seal proves the file intact, not well-formed)."""
    payload = read(path, key, magic)
    if payload is None:
        return None
    try:
        return json.loads(payload)
    except (ValueError, RecursionError):
        return None


def _ours(folder: Path, prefix: str, suffix: str) -> list[tuple[Path, float]]:
    """The files this module wrote with that prefix (name: prefix, '-', a 40-hex key, suffix; a regular file of this
    user), with their mtimes: the cache directory can be one the user shares with other files (`ML_SKILLS_CACHE=~/runs`),
    and a `re-notes.json` of theirs is not ours to delete."""
    shape = re.compile(re.escape(prefix) + "-[0-9a-f]{40}" + re.escape(suffix))
    out = []
    for p in folder.iterdir():
        if not shape.fullmatch(p.name):
            continue
        with contextlib.suppress(OSError):
            st = p.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                out.append((p, st.st_mtime))
    return out


def write(path: Path, key: str, payload: bytes, magic: bytes, keep: int) -> None:
    """Write atomically (a reader never sees half a file), then keep the newest `keep` files of the same prefix
    (the name up to its first '-'); any failure leaves the cache as it was."""
    prefix = path.name.split("-", 1)[0]
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{prefix}-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(magic + _seal(key, payload) + payload)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        files = sorted(_ours(path.parent, prefix, path.suffix), key=lambda p: p[1], reverse=True)
        for old, _ in files[keep:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
