"""What a launcher reads from the run folder besides the recorded line: the script it runs, a package of its own name planted
beside it, and the folder torchrun writes its workers' logs to.

These checks grew over the forty-second to sixty-sixth red-team rounds; policy/restart_command.py asks them after the line's
own checks (the options themselves are judged in policy/launcher_options.py). Accelerate, whose config file chose what it
loaded, is not restarted since the sixtieth round, nor a module run by name (`-m`) since the sixty-first.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
import site
import stat
import sys
import zipfile
from collections import deque

from ml_skills.policy.launcher_options import LaunchReading
from ml_skills.policy.quoting import quoted
from ml_skills.safety.invisible import INVISIBLE_CLASS


def refusal(launcher: str, reading: LaunchReading, env: dict[str, str], dfd: int) -> str | None:
    """Why the Python launcher `launcher`, its options read as `reading`, with the recorded variables `env`, run in the
    folder `dfd` would load code the line does not show, or write where it does not show, or None."""
    name = os.path.basename(launcher)
    if shadow := _shadows_a_launcher(dfd):
        return (f"the run folder holds {quoted(shadow)}, which would be imported in place of the package of that name (torchrun's "
                "workers and the script start in the run folder, first on their import path)")
    for entry in filter(None, env.get("PYTHONPATH", "").split(os.pathsep)):
        if why := _entry_refusal(name, entry, dfd):
            return why
    for what, path in (("script", reading.script), ("--log-dir", reading.log_dir)):
        if path and (way := _on_the_way(dfd, path)):
            return f"its {what} {quoted(path)} {way}"
    if reading.script and (why := _script_refusal(dfd, reading.script)):
        return why
    if reading.log_dir and (link := _a_link_on(dfd, reading.log_dir)):
        return (f"its --log-dir passes through {quoted(link)}, a link in the run folder: torchrun would write the workers' logs "
                "wherever it points (sixty-first round)")
    return None


def _entry_refusal(launcher: str, entry: str, dfd: int) -> str | None:
    """Why the recorded PYTHONPATH entry `entry` would make the launcher (its name `launcher`) import code the line does not
    show, or None. Sixty-ninth round (outside): an entry that was a zip archive (python imported sitecustomize from it), a
    link in the run folder to a folder outside it (the check went by the link's target and skipped it), a folder of the run
    folder holding `encodings/` (the standard library is looked up after PYTHONPATH), and `/proc/self/cwd/lib` (the server's
    working folder when checked, the run folder when run) each ran a planted module after an accept."""
    parts = entry.strip("/").split("/")
    named = next((k for k, part in enumerate(parts) if part not in (".", "..")), len(parts))
    if any(part in ("", ".", "..") for part in parts[named:]):
        # seventy-first round: python makes each entry absolute lexically (`nothere/../lib` is `lib`, `x/..` after a link is
        # not where the link leads), the kernel physically; the two readings part at a `.` or `..` after a named part (the
        # leading ones climb from the run folder's real path, the same both ways)
        return (f"its PYTHONPATH entry {quoted(entry)} holds a `.` or `..` part after a folder's name, or an empty one, which "
                "python and the kernel read as different folders; write the folder itself")
    if way := _on_the_way(dfd, entry):
        return f"its PYTHONPATH entry {quoted(entry)} {way}"
    try:
        kind = os.stat(entry, dir_fd=dfd).st_mode
    except OSError:
        return None  # nothing there: python skips it
    if not stat.S_ISDIR(kind):
        return (f"its PYTHONPATH entry {quoted(entry)} is not a folder: python imports from a zip archive on its path "
                "(a sitecustomize at start-up, any module), whose content the question cannot show")
    inside = _in_the_run_folder(dfd, entry)
    if inside and launcher == "torchrun":  # sixty-seventh round: the agent imports torch and what torch imports (typing_extensions, ...)
        return (f"its PYTHONPATH entry {quoted(entry)} is a folder of the run folder: torchrun's agent, the launcher itself, "
                "would import from it whatever torch imports (typing_extensions, numpy, ...), before any worker starts")
    # the server's own site-packages holds torch and what .pth files import by right; any other folder on python's path
    # that holds a name of the standard library, of an installed package (torch's typing_extensions, which torchrun's agent
    # and a script's `import torch` take from the first folder holding it: seventy-first round) or of a start-up hook is
    # imported in place of it
    if os.path.realpath(entry if os.path.isabs(entry) else f"/proc/self/fd/{dfd}/{entry}") in _own_site_packages():
        return None
    if shadow := _shadows_a_launcher(dfd, entry, _STARTUP_MODULES | _standard_library() | _installed()):
        return (f"its PYTHONPATH entry {quoted(entry)} holds {quoted(shadow)}, which python would import in place of the module "
                "of that name (the standard library's or an installed package's, at start-up or when torch or the script "
                "imports it), or as a start-up hook")
    return None


_MAX_HOPS = 40  # links followed on one path, as the kernel's own limit


def _on_the_way(dfd: int, path: str) -> str | None:
    """What on the way to `path` (relative to the run folder `dfd`, or absolute) makes it name another file than the one
    checked, or None: a part under /proc or /dev (`/proc/self/cwd` is the server's working folder here and the run folder
    in the started process), or a link inside the run folder (it leads wherever it points, and can be pointed elsewhere).
    Followed part by part, as the kernel resolves it, so `..` after a link goes where the kernel goes."""
    here = os.path.realpath(f"/proc/self/fd/{dfd}")
    cur, parts, hops = ("/" if path.startswith("/") else here), deque(path.split("/")), 0
    while parts:
        part = parts.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            cur = os.path.dirname(cur)  # `cur` holds no link: its parent is the real one
            continue
        nxt = os.path.join(cur, part)
        if _PER_PROCESS.match(nxt):
            return (f"passes through {quoted(nxt)}, which names another file in each process (the server's, where it is "
                    "checked, and the started one's)")
        try:
            mode = os.lstat(nxt).st_mode
        except FileNotFoundError:
            return None  # the rest is not there: nothing to import or run from
        except OSError as e:
            return f"passes through {quoted(nxt)}, which cannot be looked at ({e.strerror})"
        if not stat.S_ISLNK(mode):
            cur = nxt
            continue
        if cur == here or cur.startswith(here.rstrip("/") + "/"):
            return f"passes through {quoted(nxt)}, a link in the run folder: the launcher would follow it wherever it points"
        hops += 1
        if hops > _MAX_HOPS:
            return f"passes through more than {_MAX_HOPS} links"
        target = os.readlink(nxt)
        cur = "/" if target.startswith("/") else cur
        parts.extendleft(reversed(target.split("/")))
    return None


_PER_PROCESS = re.compile(r"^/+(?:proc|dev)(?:/|$)")


def _in_the_run_folder(dfd: int, path: str) -> bool:
    """Whether `path` (relative to the run folder `dfd`, or absolute) is the run folder or below it, links resolved: an
    environment's own site-packages on PYTHONPATH holds torch by right."""
    here = os.path.realpath(f"/proc/self/fd/{dfd}")
    there = os.path.realpath(path if os.path.isabs(path) else os.path.join(here, path))
    return there == here or there.startswith(here.rstrip("/") + "/")


def _script_refusal(dfd: int, script: str) -> str | None:
    """Why the script `script` (relative to the run folder `dfd`, where the launcher starts) would run code the person cannot
    read in it, or None. Sixty-sixth round (inside): python runs a folder's `__main__.py`, a zip archive's `__main__.py`, or
    compiled bytecode when the file opens with a bytecode magic number, whatever the file's name; a link runs what it points
    to; and the folder of the script's real path, not the run folder, is first on its import path."""
    if not os.path.isabs(script) and (link := _a_link_on(dfd, script)):
        return (f"its script {quoted(script)} passes through {quoted(link)}, a link in the run folder: python would run the "
                "file it points to, with that file's folder first on its import path")
    try:
        fd = os.open(script, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dfd)
    except OSError as e:
        return f"its script {quoted(script)} cannot be opened in the run folder ({e.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return (f"its script {quoted(script)} is not a regular file: python would run a folder's __main__.py, or read a "
                    "device or a pipe")
        with os.fdopen(os.dup(fd), "rb") as f:
            source = f.read(_SOURCE_READ + 1)
            archive = zipfile.is_zipfile(f)
    finally:
        os.close(fd)
    head, too_long, lone_cr = source[:_HEAD], len(source) > _SOURCE_READ, _LONE_CR.search(source) is not None
    hidden = _HIDDEN_IN_SOURCE.search(source.decode("utf-8", "replace").removeprefix("\ufeff"))
    if archive:
        return f"its script {quoted(script)} is a zip archive: python would run the __main__.py inside it, which the file does not show"
    if len(head) >= 4 and head[2:4] == b"\r\n" and not all(32 <= b < 127 or b == 9 for b in head[:2]):
        # a bytecode magic number of any version: two bytes no source opens with, then CR LF (sixty-ninth round: a pinned
        # Python 2.7 ran its own magic, 62211, outside the 3.x range that was checked)
        return f"its script {quoted(script)} is compiled bytecode (it opens with python's magic number), not source the person can read"
    if too_long:
        return f"its script {quoted(script)} is longer than the {_SOURCE_READ // 2**20} MiB ml-skills reads of a script"
    if (coding := _source_encoding(head)) is not None:
        return (f"its script {quoted(script)} declares its source encoding {quoted(coding)}: python decodes it so, and a line an "
                "editor shows as a comment can run (utf-7's '+AAo-' is a newline); only UTF-8, ASCII and Latin-1 are restarted")
    if hidden:
        return (f"its script {quoted(script)} holds U+{ord(hidden.group(0)):04X}, a character an editor draws as nothing or "
                "that reorders the text around it (Trojan Source, CVE-2021-42574): code can read as a comment or a string and "
                "run (seventy-first round)")
    if lone_cr:
        return (f"its script {quoted(script)} holds a carriage return alone inside a line: python ends the line there, so text "
                "an editor shows as part of a comment runs as code (sixty-ninth round)")
    # python puts the folder of the script's real path first on its import path (an absolute path may pass through links)
    folder = os.path.dirname(os.path.realpath(script if os.path.isabs(script) else f"/proc/self/fd/{dfd}/{script}"))
    if shadow := _shadows_a_launcher(dfd, folder, packages=_LIBRARY_MODULES | _installed()):
        return (f"the script's folder holds {quoted(os.path.join(folder, shadow))}, which would be imported in place of the module "
                "of that name (the standard library's, an installed package's or a launcher's: the script's folder is first on its "
                "import path, so `import torch` or the script's own `import json` would run it)")
    return None


# The standard library's modules a library or a script imports, less those that are programs imported by no library (a
# research folder's own `test.py` or `profile.py` shadows nothing torch or a reader of the script expects). The .pth files'
# start-up imports are done before the script's folder joins the import path, so they are not among them.
_LIBRARY_MODULES = frozenset(sys.stdlib_module_names) - {"test", "this", "antigravity", "turtle", "turtledemo", "idlelib", "profile",
                                                         "trace", "timeit", "code", "cmd"}


# PEP 263's declaration, on the first or second line
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_PLAIN_CODECS = frozenset({"utf-8", "ascii", "latin-1", "iso8859-1"})
_LINE_END = re.compile(rb"\r\n|\r|\n")
_HEAD = 64 * 1024  # the bytes of a script read for its first two lines
_SOURCE_READ = 16 * 2**20  # a script's bytes read whole (no training script is near it): a longer one is refused
_LONE_CR = re.compile(rb"\r(?!\n)")
# the invisible and reordering characters (safety/invisible) but the ASCII whitespace a source holds: tab, newline, CR, form
# feed (a NUL python refuses itself)
_HIDDEN_IN_SOURCE = re.compile(f"[{INVISIBLE_CLASS.replace(chr(0) + '-' + chr(8), '').replace(chr(11) + '-' + chr(31), chr(14) + '-' + chr(31))}]")


def _source_encoding(head: bytes) -> str | None:
    """The encoding a script's first two lines declare when it is not one an editor reads the same way (utf-7,
    unicode_escape and the like decode bytes an editor shows as a comment into code: sixty-sixth round), or None. Lines end
    as CPython's tokenizer ends them, at `\r\n`, `\r` or `\n` (sixty-seventh round: a lone `\r` made the declaration the
    second line, unseen), and two lines not ended within the bytes read are refused as unreadable (a first line of 5,000
    characters pushed it out of view)."""
    lines = _LINE_END.split(head, maxsplit=2)
    if len(lines) < 3 and len(head) >= _HEAD:
        return "(not read: its first two lines are longer than ml-skills reads)"
    for line in lines[:2]:
        if m := _CODING.match(line):
            name = m.group(1).decode("ascii", "replace")
            try:
                canonical = codecs.lookup(name).name
            except LookupError:
                return name  # not one this Python knows, but the one that runs may (Python 2.7's unicode_internal: sixty-ninth round)
            return None if canonical in _PLAIN_CODECS else name
    return None


# top-level packages a launcher or its workers import in the run folder, where the folder comes first on the import path
_LAUNCHER_PACKAGES = frozenset({"deepspeed", "torch", "accelerate"})
_HOOKS = frozenset({"sitecustomize", "usercustomize"})  # what python's site imports from its path at start-up


# what python imports from its path at start-up, before the script
_STARTUP_MODULES = _LAUNCHER_PACKAGES | _HOOKS


@functools.cache
def _own_site_packages() -> frozenset[str]:
    return frozenset(os.path.realpath(f) for f in site.getsitepackages())


@functools.cache
def _installed() -> frozenset[str]:
    """The top-level modules of the packages installed in the server's environment (torch, typing_extensions, numpy, ...)."""
    names: set[str] = set()
    for folder in site.getsitepackages():
        try:
            with os.scandir(folder) as found:
                for e in found:
                    module = e.name if e.is_dir() else m[1] if (m := _MODULE_FILE.match(e.name)) else None
                    if module and module.isidentifier():
                        names.add(module)
        except OSError:
            continue
    return frozenset(names)


@functools.cache
def _standard_library() -> frozenset[str]:
    """The standard library's top-level module names and those the environment's .pth files import at start-up
    (`_distutils_hack`): what python imports before the script, and what a script's `import json` means to its reader."""
    names = set(sys.stdlib_module_names)
    for folder in site.getsitepackages():
        try:
            pth = [f for f in os.listdir(folder) if f.endswith(".pth")]
        except OSError:
            continue
        for f in pth:
            try:
                with open(os.path.join(folder, f), encoding="utf-8", errors="replace") as fh:
                    # site runs an import line whole: every name in it may be imported (`import _virtualenv`,
                    # `__import__('_distutils_hack').do()`, `exec("import certifi...")`: seventy-first round)
                    names.update(w for line in fh if _PTH_IMPORT.match(line) for w in _WORD.findall(line))
            except OSError:
                continue
    return frozenset(names)


_PTH_IMPORT = re.compile(r"^import[ \t]")
_WORD = re.compile(r"[A-Za-z_]\w*")
# what python imports as the module X: the folder X (a package, or a namespace), or X.py, X.pyc, X.pyw, an extension module
_MODULE_FILE = re.compile(r"^([A-Za-z_]\w*)\.(?:py[cw]?|so|pyd|[\w-]+\.so)$")


def _shadows_a_launcher(dfd: int, folder: str = ".", names: frozenset[str] = _LAUNCHER_PACKAGES,
                        packages: frozenset[str] = frozenset()) -> str | None:
    """A module of `folder` (relative to the run folder `dfd`, or absolute) named like one of `names`, by default a
    launcher's package (`deepspeed/`, `torch.py`, `accelerate.pyc`): a folder of that name or a file python imports as it.
    Named like one of `packages`, only a file python imports or a folder holding an `__init__` counts: a folder without one
    is a namespace portion, which an installed package of that name wins over (a run's own `wandb/` log folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY, dir_fd=dfd)
    except OSError:
        return None
    try:
        with os.scandir(fd) as found:
            entries = sorted((e.name, e.is_dir()) for e in found)
        for n, is_dir in entries:
            module = n if is_dir else m[1] if (m := _MODULE_FILE.match(n)) else None
            if module in names or (module in packages and (not is_dir or _holds_init(fd, n))):
                return n
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def _holds_init(fd: int, name: str) -> bool:
    """Whether the folder `name` of `fd` is a regular package (an `__init__` python imports), or cannot be looked into."""
    try:  # through a link too, as python's import does
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK, dir_fd=fd)
    except OSError:
        return True  # a folder that cannot be read: taken as the module it may be
    try:
        return any(_MODULE_FILE.match(x) and x.split(".")[0] == "__init__" for x in os.listdir(sub))
    finally:
        os.close(sub)


def _a_link_on(dfd: int, path: str) -> str | None:
    """The first part of the relative `path`, below the folder `dfd`, that is a symbolic link (or cannot be looked at),
    or None: the parts that do not exist yet are made by torchrun, as folders."""
    parts = [p for p in path.split("/") if p]
    for n in range(1, len(parts) + 1):
        sub = "/".join(parts[:n])
        try:
            mode = os.stat(sub, dir_fd=dfd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        except OSError:
            return sub
        if stat.S_ISLNK(mode):
            return sub
    return None
