"""Confine every path a tool is given to the allowed roots, before anything is opened.

Containment is decided on the fully resolved path (symlinks followed), never by string prefix,
so `/data_evil` is not inside `/data` and a symlink pointing out of a root is refused. Hostile
spellings (NUL bytes, `~`, `..` components) are refused outright rather than normalised, and
only regular files (or directories, where asked) are accepted: FIFOs, sockets, devices and the
kernel's /proc, /sys and /dev trees are refused from `stat`, which never blocks.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from ml_skills.errors import PathNotAllowed, TargetNotFound, UnreadableInput

MAX_PATH_CHARS = 4096
_KERNEL_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))

Want = Literal["file", "dir", "any"]


def normalise_roots(roots: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Resolve each root once; a root that does not exist is dropped (it can contain nothing)."""
    out: list[Path] = []
    for r in roots:
        p = Path(r).expanduser()
        try:
            real = p.resolve(strict=True)
        except OSError:
            continue
        if real not in out:
            out.append(real)
    return out


def _describe(roots: Sequence[Path]) -> str:
    return ", ".join(str(r) for r in roots) or "(none)"


def refuse_kernel_tree(real: Path) -> None:
    """/proc, /sys and /dev hold process environments, endless and blocking files: never read, whoever asks."""
    for tree in _KERNEL_TREES:
        if real == tree or real.is_relative_to(tree):
            raise PathNotAllowed(f"{real} is under {tree}: kernel and device files are never read")


def confine(path: str, roots: Sequence[Path], want: Want = "file") -> Path:
    """Return the resolved path if it lies inside one of `roots` and is the wanted kind.

    Relative paths start from the first root. Raises PathNotAllowed for hostile or outside
    paths, TargetNotFound when nothing is there, UnreadableInput for special files.
    """
    if not roots:
        raise PathNotAllowed("no allowed roots are configured: start the server with --allow-root DIR")
    if not isinstance(path, str) or not path.strip():
        raise PathNotAllowed("empty path: give a file path inside the allowed roots " + _describe(roots))
    if "\x00" in path:
        raise PathNotAllowed("path contains a NUL byte: refused")
    if len(path) > MAX_PATH_CHARS:
        raise PathNotAllowed(f"path is longer than {MAX_PATH_CHARS} characters: refused")
    if path.startswith("~"):
        raise PathNotAllowed(f"'~' paths are not expanded: give the full path inside {_describe(roots)}")
    if ".." in Path(path).parts:
        raise PathNotAllowed(f"'..' is not allowed in paths: give the path inside {_describe(roots)} directly")
    raw = Path(path)
    candidate = raw if raw.is_absolute() else roots[0] / raw
    try:
        real = candidate.resolve(strict=True)
    except FileNotFoundError:
        raise TargetNotFound(f"nothing at {candidate}: check the path (relative paths start from {roots[0]})") from None
    except (OSError, RuntimeError) as e:  # symlink loop, permission
        raise PathNotAllowed(f"cannot resolve {candidate}: {getattr(e, 'strerror', None) or e}") from None
    refuse_kernel_tree(real)
    if not any(real == r or real.is_relative_to(r) for r in roots):
        raise PathNotAllowed(f"{path} resolves to {real}, outside the allowed roots {_describe(roots)}; "
                             "start the server with --allow-root for that directory")
    try:
        st = os.stat(real)
    except OSError as e:
        raise UnreadableInput(f"{real} cannot be read: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        if want == "file":
            raise UnreadableInput(f"{real} is a directory; give a file inside it (list_artifacts shows what is there)")
        return real
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableInput(f"{real} is not a regular file (FIFO, socket or device): only regular files are read")
    if want == "dir":
        raise UnreadableInput(f"{real} is a file; give the directory that holds it")
    return real


def confine_new(path: str, roots: Sequence[Path]) -> Path:
    """Confine a directory that may not exist yet (an output directory): its nearest existing parent decides."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path or path.startswith("~") or ".." in Path(path).parts:
        raise PathNotAllowed(f"output directory {path!r} refused: give a plain path inside {_describe(roots)}")
    raw = Path(path)
    candidate = raw if raw.is_absolute() else roots[0] / raw
    existing = candidate
    while not existing.exists():
        existing = existing.parent
    confine(str(existing), roots, want="dir")
    real = existing.resolve() / candidate.relative_to(existing) if existing != candidate else existing.resolve()
    return real
