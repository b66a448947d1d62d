"""glob.glob with a budget: triage-runs' and --expect's globs of runs and result files.

`glob.glob` follows symlinked directories and builds its whole answer before returning. Two links
to `.` in a folder make `runs/*/*/*/*/*/*/*/*/*/*/train.log` name 2**10 paths, six links 6**10 (60
million): the call never answered, and the thread it ran in kept the MCP server busy after its
client had hung up. Here a directory reached again at the same depth (two links to one folder) is
listed once, and the walk stops after MAX_LISTED directory entries or MAX_MATCHES matches, saying so.
Otherwise it matches as glob.glob does: shell patterns per path component, names starting with '.'
only for a pattern that starts with '.', sorted.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Callable

MAX_LISTED = 1_000_000  # directory entries looked at, over the whole walk
MAX_MATCHES = 100_000


def bounded_glob(pattern: str, max_listed: int = MAX_LISTED, max_matches: int = MAX_MATCHES,
                 inside: Callable[[str], bool] | None = None) -> tuple[list[str], bool]:
    """(sorted matches, complete): complete is False when a budget stopped the walk. With `inside` (the MCP tools' roots),
    a folder it refuses is never entered: before the fourteenth round `runs/*/*` listed a folder outside the roots through
    a link in the roots, and every name in it came back as a run (its existence too: `runs/*/name`)."""
    if not glob.has_magic(pattern):
        return ([pattern] if os.path.lexists(pattern) else []), True
    head, *parts = pattern.split("/")
    current = [head + "/" if head == "" else head]  # '' is the filesystem root of an absolute pattern
    if head and glob.has_magic(head):
        current, parts = ["."], [head, *parts]
    parts = [p for p in parts if p]  # 'a//b' is 'a/b'
    listed = 0
    fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))  # the leading folders: confined by the caller
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt: list[str] = []
        seen: set[tuple[int, int]] = set()  # directories already taken at this depth (two links to one folder)
        for d in current:
            if not glob.has_magic(part):
                p = os.path.join(d, part)
                if (os.path.lexists(p) if last else os.path.isdir(p) and (i < fixed or _allowed(p, inside))) and _first(p, last, seen):
                    nxt.append(p)
                continue
            try:
                with os.scandir(d) as it:
                    names: dict[str, bool] = {}  # name -> is a symlink
                    for e in it:
                        listed += 1
                        if listed > max_listed:
                            return sorted(_clean(x, head) for x in nxt), False
                        names[e.name] = e.is_symlink()
            except OSError:
                continue
            hidden = part.startswith(".")
            # a folder's own name before a link's to it (runs/latest -> r5 is found as r5)
            for name in sorted(fnmatch.filter(names, part), key=lambda n: (names[n], n)):
                if name.startswith(".") and not hidden:
                    continue
                p = os.path.join(d, name)
                if (last or os.path.isdir(p) and _allowed(p, inside)) and _first(p, last, seen):
                    nxt.append(p)
                    if last and len(nxt) >= max_matches:
                        return sorted(_clean(x, head) for x in nxt), False
        current = nxt
        if not current:
            break
    return sorted(_clean(x, head) for x in current), True


def _allowed(path: str, inside: Callable[[str], bool] | None) -> bool:
    return inside is None or inside(path)


def _first(path: str, last: bool, seen: set[tuple[int, int]]) -> bool:
    """Whether a directory is new at this depth; files (the last component) are all kept."""
    if last:
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    key = (st.st_dev, st.st_ino)
    if key in seen:
        return False
    seen.add(key)
    return True


def _clean(path: str, head: str) -> str:
    """A relative pattern's matches without the './' the walk started from, as glob.glob gives them."""
    return path[2:] if head != "." and path.startswith("./") else path
