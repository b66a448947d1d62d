"""Confine every path to the allowed roots, and open files without a window to swap them.

One rule for every path, whether a tool was given it or it was read from data (a `latest`
pointer's contents, a symlink inside a run directory, a W&B `latest-run` link, a process's open
files): `contain` resolves it fully (symlinks followed) and requires the result inside one of the
active roots, never by string prefix, so `/data_evil` is not inside `/data`. `confine` adds the
rules for spellings a caller typed (NUL, `~`, `..`, over-long). The kernel's /proc, /sys and /dev
trees are refused whoever asks.

Deciding is not opening: between the two, a directory can be swapped for a symlink or a file for
a FIFO. So `open_binary` and `open_dir` never reopen the checked string. They walk from the
root's directory fd, one component at a time, with O_NOFOLLOW and O_NONBLOCK, and check S_ISREG
(or S_ISDIR) on the fd they got: a swap makes the open fail, never read elsewhere or block.
Directory trees are walked with `os.fwalk`, which descends through held fds the same way.

The active roots live in a context variable: the MCP server sets them for each call, the CLI to
the directories the person named (`scope`). With none active (the CLI given a process id), paths
are still resolved, kernel trees refused and files opened by the same walk from `/`.
"""

from __future__ import annotations

import errno
import io
import itertools
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from pathlib import Path
from typing import Literal, cast

from ml_skills.errors import InputError, PathNotAllowed, TargetNotFound, UnreadableInput

MAX_PATH_CHARS = 4096
_KERNEL_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY

Want = Literal["file", "dir", "any"]

_active: ContextVar[tuple[Path, ...] | None] = ContextVar("ml_skills_allowed_roots", default=None)


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


def active_roots() -> tuple[Path, ...] | None:
    """The roots every path is confined to now; None when nothing set them (a library call, the CLI on a pid)."""
    return _active.get()


def enter(roots: Sequence[Path]) -> Token[tuple[Path, ...] | None]:
    """Make `roots` (already resolved) the active roots until `leave(token)`; for async callers."""
    return _active.set(tuple(roots))


def leave(token: Token[tuple[Path, ...] | None]) -> None:
    _active.reset(token)


@contextmanager
def within(roots: Sequence[Path]) -> Iterator[None]:
    """Confine everything under this block to `roots` (already resolved)."""
    token = enter(roots)
    try:
        yield
    finally:
        leave(token)


@contextmanager
def scope(*bases: str | os.PathLike[str] | None) -> Iterator[None]:
    """Entry points: when no roots are active yet, confine to the directories the person named.

    A file named stands for its directory. Under the MCP server the call's roots are active
    already and stay as they are.
    """
    if _active.get() is not None:
        yield
        return
    dirs: list[Path] = []
    for b in bases:
        if b is None or not str(b).strip():
            continue
        p = Path(b).expanduser()
        try:
            real = p.resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        dirs.append(real if real.is_dir() else real.parent)
    if not dirs:
        yield
        return
    with within(normalise_roots(dirs)):
        yield


def _describe(roots: Sequence[Path]) -> str:
    return ", ".join(str(r) for r in roots) or "(none)"


def refuse_kernel_tree(real: Path, given: Path | None = None) -> None:
    """/proc, /sys and /dev hold process environments, endless and blocking files: never read, whoever asks.

    The refusal names the path `given` when there is one, never where its links lead (sixteenth round: `/dev/fd/0` was
    refused as "/dev/null is under /dev" and `/proc/mounts` as "/proc/4242/mounts ...": which file the server's fd 0 is,
    and its pid)."""
    for tree in _KERNEL_TREES:
        if real == tree or real.is_relative_to(tree):
            shown = given if given is not None else real
            named = next((t for t in _KERNEL_TREES if shown == t or shown.is_relative_to(t)), tree)
            raise PathNotAllowed(f"{shown} is under {named}: kernel and device files are never read")


def _root_of(real: Path, roots: Sequence[Path]) -> Path | None:
    """The innermost root holding `real`, or None."""
    holding = [r for r in roots if real == r or real.is_relative_to(r)]
    return max(holding, key=lambda r: len(r.parts)) if holding else None


def _kind(real: Path, want: Want) -> None:
    """Refuse anything but a regular file (or a directory where wanted), from stat: it never blocks."""
    try:
        st = os.stat(real)
    except OSError as e:
        raise UnreadableInput(f"{real} cannot be read: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        if want == "file":
            raise UnreadableInput(f"{real} is a directory; give a file inside it (list_artifacts shows what is there)")
        return
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableInput(f"{real} is not a regular file (FIFO, socket or device): only regular files are read")
    if want == "dir":
        raise UnreadableInput(f"{real} is a file; give the directory that holds it")


def contain(path: str | os.PathLike[str], want: Want = "any", roots: Sequence[Path] | None = None) -> Path:
    """The one confinement rule: the fully resolved path, inside the roots, of the wanted kind.

    `roots` defaults to the active roots. Paths read from data (pointer contents, symlinks in a
    run directory, a process's open files) come here directly; typed paths through `confine`.
    """
    roots = active_roots() if roots is None else roots
    candidate = Path(path)
    try:
        real = candidate.resolve(strict=True)
    except FileNotFoundError:
        if roots is not None and _leads_out(candidate, roots):  # a link out of the roots: one answer, its target there or not
            raise PathNotAllowed(_outside(candidate, roots)) from None
        raise TargetNotFound(f"nothing at {candidate}: check the path") from None
    except OSError as e:
        if e.errno == errno.EINVAL:  # readlink on a part that stopped being a link: swapped under us
            raise PathNotAllowed(f"{candidate} changed while it was opened (a part of it was swapped): refused, "
                                 "nothing was read") from None
        if roots is not None and _leads_out(candidate, roots):  # nineteenth round: "Permission denied" for a link out of the
            raise PathNotAllowed(_outside(candidate, roots)) from None  # roots told a folder the server cannot search is there
        raise PathNotAllowed(f"cannot resolve {candidate}: {e.strerror or e}") from None
    except RuntimeError as e:  # symlink loop: "Symlink loop from '/where/it/loops'"
        raise PathNotAllowed(_loop(candidate, str(e), roots)) from None
    outside = roots is not None and _root_of(real, roots) is None
    held = roots or []
    spelled = Path(os.path.abspath(candidate))
    if outside and not any(spelled == t or spelled.is_relative_to(t) for t in _KERNEL_TREES):
        # a link in the roots into /proc gets the refusal of any link out, never "/proc/1/environ is under /proc"
        # (thirteenth round: it named where the link leads, and the server's own pid through /proc/self)
        raise PathNotAllowed(_outside(candidate, held))
    refuse_kernel_tree(real, spelled)
    if outside:
        raise PathNotAllowed(_outside(candidate, held))
    _kind(real, want)
    return real


def _loop(candidate: Path, why: str, roots: Sequence[Path] | None) -> str:
    """The refusal of a path that runs into a loop of links. It never names where the loop is: before the nineteenth round a
    link out of the roots into a loop answered "Symlink loop from '/elsewhere/...'" (where the link leads, and that a loop is
    there), against "outside the allowed roots" for any other link out."""
    where = why.partition("from ")[2].strip("'\"")
    if roots is not None and (not where or _root_of(Path(where), roots) is None):
        return _outside(candidate, roots)
    return f"cannot resolve {candidate}: it runs into a symlink loop"


def _outside(candidate: Path, roots: Sequence[Path]) -> str:
    """The refusal of a path outside the roots. It names the path given, never where a link in it leads: "X resolves to
    /elsewhere/..." told the caller where a link in the roots points, and (with "nothing at X" for a dangling one)
    whether a file exists there (tenth round)."""
    return (f"{candidate} is outside the allowed roots {_describe(roots)}, or leads out of them through a link (not "
            "followed); start the server with --allow-root for that directory")


def leads_out_of_roots(path: Path) -> bool:
    """Whether `path` (a link that may dangle) leads out of the active roots; False when no roots are active (the CLI)."""
    roots = active_roots()
    return roots is not None and _leads_out(path, roots)


def _leads_out(candidate: Path, roots: Sequence[Path]) -> bool:
    """Whether a path that does not resolve leads out of the roots as far as it goes (a dangling link to /elsewhere)."""
    try:
        loose = candidate.resolve(strict=False)
    except (OSError, RuntimeError):
        return True
    return _root_of(loose, roots) is None


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
        return contain(candidate, want, roots)
    except TargetNotFound:  # the path as given: Path() folds `//`, and `x?u=https://u:PW@h` lost the `://` redaction needs
        where = "" if raw.is_absolute() else f" (relative paths start from {roots[0]})"
        raise TargetNotFound(f"nothing at {path}: check the path{where}") from None
    except PathNotAllowed as e:
        raise PathNotAllowed(str(e).replace(str(candidate), path, 1)) from None


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


# ---------------------------------------------------------------- opening through held fds


def _walk_fd(real: Path, final_flags: int) -> int:
    """Open `real` (resolved, contained) by walking from its root's fd, no symlink followed on the way."""
    roots = active_roots()
    root = _root_of(real, roots) if roots is not None else Path(real.anchor)
    if root is None:
        raise PathNotAllowed(f"{real} is outside the allowed roots {_describe(roots or ())}")
    parts = real.relative_to(root).parts
    try:  # the root itself was resolved when it was set; a file can be a root too (--allow-root train.log)
        fd = os.open(root, (os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) if parts else final_flags)
    except OSError as e:
        raise UnreadableInput(f"{root} cannot be opened: {e.strerror or e}") from None
    try:
        for i, comp in enumerate(parts):
            last = i == len(parts) - 1
            nfd = os.open(comp, final_flags if last else _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise PathNotAllowed(f"{real} changed while it was opened (a part of it is now a symlink or not a "
                                 "directory): refused, nothing was read") from None
        if e.errno == errno.ENOENT:
            raise TargetNotFound(f"{real} disappeared before it could be opened") from None
        raise UnreadableInput(f"{real} cannot be read: {e.strerror or e}") from None
    return fd


def open_fd(path: str | os.PathLike[str], want: Literal["file", "dir"] = "file") -> int:
    """A read-only fd on a regular file (or a directory) inside the roots; the kind is checked on the fd."""
    real = contain(path, want)
    fd = _walk_fd(real, _DIR_FLAGS if want == "dir" else _FILE_FLAGS)
    st = os.fstat(fd)
    ok = stat.S_ISDIR(st.st_mode) if want == "dir" else stat.S_ISREG(st.st_mode)
    if not ok:
        os.close(fd)
        what = "a directory" if want == "dir" else "a regular file (FIFO, socket or device)"
        raise UnreadableInput(f"{real} is not {what}: it changed while it was opened; nothing was read")
    if want == "file":
        os.set_blocking(fd, True)
    return fd


def make_dirs_held(real: Path, start: Path) -> int:
    """`mkdir -p` of `real` (resolved) below `start` (a root, or `/` for the server's own folders), each level made and
    entered relative to the fd of the one above it, with no link followed: a folder swapped for a link to elsewhere
    while the levels are made refuses there, nothing made through it. Checking the path, then making it by name, made
    folders outside the roots under a race (thirty-first round). An fd on `real`."""
    try:
        fd = os.open(start, _DIR_FLAGS)
    except OSError as e:
        raise PathNotAllowed(f"{start} cannot be opened as a plain directory ({e.strerror or e}): nothing was written") from None
    try:
        for comp in real.relative_to(start).parts:
            try:
                os.mkdir(comp, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            nfd = os.open(comp, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise PathNotAllowed(f"the out dir {real} cannot be made there: a part of its path is a link or not a folder; "
                                 "nothing was written") from None
        raise PathNotAllowed(f"the out dir {real} cannot be made ({e.strerror or e}): nothing was written") from None
    os.set_blocking(fd, True)
    return fd


def held_out_dir_in_roots(real: Path) -> int:
    """A caller's out dir (confined: `real` is resolved up to its nearest existing level), made from its root's fd."""
    roots = active_roots()
    root = _root_of(real, roots) if roots is not None else None
    if root is None:
        raise PathNotAllowed(f"{real} is outside the allowed roots {_describe(roots or ())}")
    return make_dirs_held(real, root)


def make_dirs(path: Path) -> None:
    """`mkdir -p` one level at a time: pathlib's and os.makedirs recurse once per missing level, so a path 1,500 levels
    deep raised RecursionError after creating ~1,000 of them (twenty-ninth round's note). OSError as mkdir raises it."""
    missing: list[Path] = []
    while not path.is_dir() and path != path.parent:
        missing.append(path)
        path = path.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            if not d.is_dir():
                raise


def open_out_dir(out: Path) -> int:
    """An fd on the server's own out dir (resolved when the server started), created if missing, opened now with no
    link followed, and refused when it is no longer that folder (a part of its path swapped for a link since). What is
    written through it stays there: a restart's log and a repoint's backup went wherever a link planted at the out
    dir's name pointed (sixth round); its missing levels were made by path, through such a link, before the refusal
    (thirty-first round)."""
    fd = make_dirs_held(out, Path(out.anchor))
    if os.path.isdir("/proc/self/fd") and os.path.realpath(f"/proc/self/fd/{fd}") != str(out):  # where the fd really is
        os.close(fd)
        raise PathNotAllowed(f"the out dir {out} is no longer that folder (a part of its path is now a link): nothing was "
                             "written")
    return fd


def open_binary(path: str | os.PathLike[str], buffering: int = -1) -> io.FileIO | io.BufferedReader:
    """`open(path, 'rb')` that cannot block on a FIFO, follow a swapped symlink or leave the roots."""
    # typeshed types fdopen as BinaryIO for a non-literal `buffering`; at run time it is FileIO (0) or BufferedReader
    return cast("io.FileIO | io.BufferedReader", os.fdopen(open_fd(path), "rb", buffering=buffering))


def read_capped(path: str | os.PathLike[str], cap: int) -> bytes:
    """A small file (pointer, manifest, metrics, index) read whole, refused when it is over `cap` bytes."""
    with open_binary(path) as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise UnreadableInput(f"{Path(path).name} is over {cap // 1024} KiB: too large for what it should hold; not read")
    return data


def exists_below(base: Path, rel: str) -> bool:
    """Whether `rel` exists under `base` (a contained directory), looked up through held fds, never leaving it.

    No symlink is followed, so the answer says nothing about any file outside `base`.
    """
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts or "\x00" in rel:
        raise PathNotAllowed(f"{rel!r} must be a plain name inside {base}")
    fd = open_fd(base, "dir")
    try:
        for comp in parts[:-1]:
            try:
                nfd = os.open(comp, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                return False
            os.close(fd)
            fd = nfd
        try:
            os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except OSError:
            return False
        return True
    finally:
        os.close(fd)


MAX_WALK_DEPTH = 100  # folders below the base a walk enters at most: os.fwalk recurses (and holds an fd) per level


def walk(base: Path, max_depth: int | None = None) -> Iterator[tuple[Path, list[str], list[str]]]:
    """os.walk over a contained directory through held fds (os.fwalk): a directory swapped for a
    symlink mid-walk is not entered. Symlinks appear among the names, never followed; the caller
    decides about each (through `contain`). Prune `dirnames` in place as with os.walk. Never deeper than
    MAX_WALK_DEPTH: a folder nested 3,000 deep made `verify-artifacts` end in "internal error: RecursionError"
    (twelfth round)."""
    real = contain(base, "dir")
    max_depth = MAX_WALK_DEPTH if max_depth is None else min(max_depth, MAX_WALK_DEPTH)
    walker = os.fwalk(real, follow_symlinks=False)
    try:  # the first step opens the folder: one removed since `contain` (a checkpoint rotated away) is gone, as contain says
        first = next(walker, None)
    except OSError as e:  # of one missing; before the twenty-seventh round the OSError ended the diagnosis ("internal error")
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            raise TargetNotFound(f"{real} disappeared before it could be opened") from None
        raise UnreadableInput(f"{real} cannot be read: {e.strerror or e}") from None
    for dirpath, dirnames, filenames, _fd in itertools.chain([first] if first is not None else [], walker):
        d = Path(dirpath)
        if len(d.relative_to(real).parts) >= max_depth:
            dirnames[:] = []
        yield d, dirnames, filenames


def below(base: Path) -> Iterator[Path]:
    """Every name below `base` (folders, files and links, no link entered), spelled under `base`, through `walk`: never
    deeper than MAX_WALK_DEPTH. `Path.rglob` recursed once per level: a folder nested 3,000 deep ended `preflight-run`
    and a repoint's prepare in RecursionError (twelfth round)."""
    real = contain(base, "dir")
    for d, dirnames, filenames in walk(real):
        rel = base / d.relative_to(real)
        for n in (*dirnames, *filenames):
            yield rel / n


def write_bytes(data: bytes, out_dir: str | os.PathLike[str], filename: str) -> Path:
    """Write a file of --out-dir as a new temp file renamed over the name: a link planted at the name (a run
    folder's `check-failed-run.png -> ~/.bashrc`, diagnosed from inside) is replaced, never written through."""
    out = Path(out_dir)
    try:
        make_dirs(out)
    except OSError as e:
        raise InputError(f"cannot create --out-dir {out}: {e.strerror or e}") from None
    target = out / filename
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{filename}.", suffix=".tmp", dir=out)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        raise InputError(f"cannot write {target}: {e.strerror or e}") from None
    return target
