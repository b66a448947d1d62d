"""Python's compiled regular expressions, kept between processes of the CLI.

A one-shot diagnosis of an everyday log compiles about 70 of the engine's lazy patterns (lazyre.py): 15-20 ms of a
0.35 s run, nearly all of it in `re`'s parser and code generator, which give the same program for the same pattern
on the same Python every time. That program (a list of integers, with the pattern's flags and groups) is what
`_sre.compile` turns into a pattern object, so it is kept in a sealed file of the cache directory
(diskcache.py), named by the Python build and `_sre`'s version: a pattern found there is made by
`_sre.compile` from its program, which gives the very object `re.compile` gives; any other is compiled by
`re.compile` and its program added to the file when the process exits. `_sre` checks every program it is given
and refuses a malformed one; a file that is damaged, foreign or not trusted, a Python without `_sre` or with a
different `re`, or any refusal means `re.compile`, never a failure.

The file grows with every pattern any run of this cache has compiled (all of them, some 330 and 580 KB, after
`--warm-cache`), and a run needs about a hundred. So a run reads first a second, smaller file of the programs recent
runs used (`rh-`, "hot"), and the whole file only when a pattern is not there; a run that had to is remembered in
the hot file at exit (with what it held, unless that passes HOT_MAX, when it holds this run's programs only).
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import re
import sys
from array import array
from collections.abc import Sequence
from typing import Any

from ml_skills import diskcache

MAGIC = b"MLSKRE2\n"
KEEP = 4  # files kept: one per Python build in use
MAX_ENTRIES = 4000  # a bound on the file; past it new patterns are compiled each time

HOT_MAX = 240  # programs in the hot file: a few runs' worth

_loaded: dict[str, list[Any]] | None = None
_new: dict[str, list[Any]] = {}
_hot: dict[str, list[Any]] | None = None
_used: dict[str, list[Any]] = {}  # the programs this run used, by name (packed), when one was not in the hot file
_missed = False

try:
    import _sre
    from re import _compiler, _parser  # type: ignore[attr-defined]  # re's own modules (Python 3.11+)

    _KEY = hashlib.sha256(f"{sys.version}\0{sys.implementation.cache_tag}\0{_sre.MAGIC}\0{_sre.CODESIZE}".encode()).hexdigest()[:40]
    if array("I").itemsize != _sre.CODESIZE:  # pragma: no cover - the code is kept as an array of that width
        _KEY = ""
except (ImportError, AttributeError):  # pragma: no cover - another implementation of `re`
    _KEY = ""


def _path(prefix: str = "re") -> Any:
    return diskcache.cache_dir() / f"{prefix}-{_KEY}.json"


def _read(prefix: str) -> dict[str, list[Any]]:
    data = diskcache.read_json(_path(prefix), _KEY, MAGIC)
    return data if isinstance(data, dict) else {}


def _made(pattern: str | bytes, e: Any) -> re.Pattern[Any] | None:
    """The pattern `_sre` makes from a kept program, or None when the program is not one `re.compile` could have given.
    `_sre` checks the code against the group count it is handed, not the count itself nor the group names: a sealed
    file holding a count of 10**9 took all the machine's memory, and a name given a group past the count raised
    IndexError at a match (twenty-third round). A program that is another pattern's, well formed, is not caught: a file
    of this user's own is trusted as the user's other files are (docs/security.md, "What is not promised")."""
    try:
        flags, packed, groups, groupindex, indexgroup = e
        if not (type(flags) is int and type(groups) is int and 0 <= groups <= len(pattern) and type(indexgroup) is list
                and len(indexgroup) == groups + 1 and all(x is None or type(x) is str for x in indexgroup)
                and type(groupindex) is dict and all(type(i) is int and 1 <= i <= groups and indexgroup[i] == k
                                                     for k, i in groupindex.items())):
            return None
        return _sre.compile(pattern, flags, _code(packed), groups, groupindex, tuple(indexgroup))
    except Exception:  # noqa: BLE001 - a program _sre refuses, or not a program at all
        return None


def _entries() -> dict[str, list[Any]]:
    global _loaded
    if _loaded is None:
        _loaded = _read("re")
    return _loaded


def _kept(name: str) -> list[Any] | None:
    """The kept program of this name: from the hot file, else (noting the miss) from the whole file."""
    global _hot, _missed
    if _hot is None:
        _hot = _read("rh")
    e = _hot.get(name)
    if e is None:
        if not _missed:
            _missed = True
            atexit.register(_save_hot)
        e = _entries().get(name)
    if e is not None:
        _used[name] = e
    return e


def _save_hot() -> None:
    """At exit, after a run that missed the hot file: the hot file holds what it held and what this run used."""
    global _missed
    if not _missed or not _used:
        return
    hot = {**(_hot or {}), **_used}
    if len(hot) > HOT_MAX:
        hot = dict(_used)
    _missed = False
    diskcache.write(_path("rh"), _KEY, json.dumps(hot, separators=(",", ":")).encode(), MAGIC, KEEP)


def _name(pattern: str | bytes, flags: int) -> str:
    kind = "b" if isinstance(pattern, bytes) else "s"
    text = pattern.decode("latin-1") if isinstance(pattern, bytes) else pattern
    return f"{kind}{int(flags)}:{text}"


def _packed(e: list[Any]) -> list[Any]:
    """The code as base64 of its array of words: parsed as one string, 3-4x faster than a JSON list of integers."""
    return [e[0], base64.b64encode(array("I", e[1]).tobytes()).decode("ascii"), *e[2:]]


def _code(packed: str) -> list[int]:
    return array("I", base64.b64decode(packed, validate=True)).tolist()


def program(pattern: str | bytes, flags: int) -> list[Any]:
    """What `re.compile` hands `_sre.compile` for this pattern: [flags, code, groups - 1, groupindex, indexgroup]."""
    p = _parser.parse(pattern, flags)
    groupindex = dict(p.state.groupdict)
    indexgroup: list[str | None] = [None] * p.state.groups
    for k, i in groupindex.items():
        indexgroup[i] = k
    return [flags | p.state.flags, _compiler._code(p, flags), p.state.groups - 1, groupindex, indexgroup]


def compile(pattern: Any, flags: int = 0) -> re.Pattern[Any]:
    """`re.compile(pattern, flags)`, from the kept program when there is one."""
    flags = int(flags)
    if not _KEY or not isinstance(pattern, (str, bytes)) or flags & re.DEBUG:
        return re.compile(pattern, flags)
    name = _name(pattern, flags)
    e = _kept(name)
    if e is not None and (made := _made(pattern, e)) is not None:
        return made  # else a program _sre refuses, or not one: compile the pattern again
    if len(_entries()) + len(_new) >= MAX_ENTRIES:
        return re.compile(pattern, flags)
    try:  # compiled once, the way re.compile does, keeping the program on the way
        e = program(pattern, flags)
        rx = _sre.compile(pattern, e[0], e[1], e[2], e[3], tuple(e[4]))
    except Exception:  # noqa: BLE001 - a bad pattern raises re.error from re.compile itself, as it would have
        return re.compile(pattern, flags)
    _new[name] = _used[name] = _packed(e)
    if len(_new) == 1:
        atexit.register(save)
    return rx


def save(hot: bool = True) -> int:
    """Add the programs compiled in this process to the file (merged with what another process wrote meanwhile);
    how many programs the file holds then (0 when it could not be written). hot=False (`--warm-cache`, which compiles
    every pattern): the hot file is not written at exit, as no run uses them all."""
    global _loaded, _missed
    if not hot:
        _missed = False
    if not _new:
        return len(_entries())
    _loaded = None
    merged = {**_entries(), **_new}
    _new.clear()
    diskcache.write(_path(), _KEY, json.dumps(merged, separators=(",", ":")).encode(), MAGIC, KEEP)
    _loaded = None
    return len(_entries())


SET_MAGIC = b"MLSKRS1\n"
SET_KEEP = 8  # files kept: one per pattern set (the scan's matchers) and Python build


class PatternSet(Sequence[re.Pattern[bytes]]):
    """The compiled patterns of a set, each made from its kept program when it is first read."""

    def __init__(self, patterns: list[bytes], flags: int, kept: list[Any]) -> None:
        self._patterns, self._flags, self._kept = patterns, flags, kept
        self._made: list[re.Pattern[bytes] | None] = [None] * len(patterns)

    def __len__(self) -> int:
        return len(self._patterns)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        rx = self._made[i]
        if rx is None:
            p = self._patterns[i]
            rx = _made(p, self._kept[i])
            if rx is None:  # a program _sre refuses, or not one: compiled again, as re.compile does
                rx = re.compile(p, self._flags)
            self._made[i] = rx
        return rx


def compile_set(patterns: list[bytes], flags: int) -> Sequence[re.Pattern[bytes]]:
    """`[re.compile(p, flags) for p in patterns]` for a fixed set of patterns used together (the `re` engine's
    matchers, engine/read/matcher.py: some 170 catalog patterns, 0.1-0.17 s to compile, on every CLI run of a log
    under 32 KiB), from their programs kept in a sealed file of their own, named by the set, the flags and the
    Python build; each is made when first read. Kept apart from the lazy patterns' file: those programs (about
    400 KB) are read only by the runs that use them. A set not kept yet is compiled as re.compile does, and the
    file written when it can be; a program `_sre` refuses is compiled again."""
    flags = int(flags)
    if not _KEY or flags & re.DEBUG:
        return [re.compile(p, flags) for p in patterns]
    h = hashlib.sha256(f"{_KEY}\0{flags}\0".encode())
    for p in patterns:
        h.update(len(p).to_bytes(4, "little") + p)
    key = h.hexdigest()[:40]
    path = diskcache.cache_dir() / f"rs-{key}.json"
    kept = diskcache.read_json(path, key, SET_MAGIC)
    if isinstance(kept, list) and len(kept) == len(patterns):  # else none, or a damaged set: compile it again
        return PatternSet(patterns, flags, kept)
    out, progs = [], []
    for p in patterns:
        try:
            e = program(p, flags)
            out.append(_sre.compile(p, e[0], e[1], e[2], e[3], tuple(e[4])))
            progs.append(_packed(e))
        except Exception:  # noqa: BLE001 - re.compile raises what it would have; nothing is kept
            return [re.compile(p, flags) for p in patterns]
    diskcache.write(path, key, json.dumps(progs, separators=(",", ":")).encode(), SET_MAGIC, SET_KEEP)
    return out
