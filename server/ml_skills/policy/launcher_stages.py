"""What a launcher reads from the run folder besides the recorded line: the script it runs, a package of its own name planted
beside it, and the folder torchrun writes its workers' logs to.

These checks grew over the forty-second to sixty-sixth red-team rounds; policy/restart_command.py asks them after the line's
own checks (the options themselves are judged in policy/launcher_options.py). Accelerate, whose config file chose what it
loaded, is not restarted since the sixtieth round, nor a module run by name (`-m`) since the sixty-first.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import zipfile

from ml_skills.policy.launcher_options import LaunchReading
from ml_skills.policy.quoting import quoted


def refusal(launcher: str, reading: LaunchReading, env: dict[str, str], dfd: int) -> str | None:
    """Why the Python launcher `launcher`, its options read as `reading`, with the recorded variables `env`, run in the
    folder `dfd` would load code the line does not show, or write where it does not show, or None."""
    name = os.path.basename(launcher)
    if shadow := _shadows_a_launcher(dfd):
        return (f"the run folder holds {quoted(shadow)}, which would be imported in place of the package of that name (torchrun's "
                "workers and the script start in the run folder, first on their import path)")
    for entry in filter(None, env.get("PYTHONPATH", "").split(os.pathsep)):
        if not _in_the_run_folder(dfd, entry):
            continue
        if name == "torchrun":  # sixty-seventh round: the agent imports torch and what torch imports (typing_extensions, ...)
            return (f"its PYTHONPATH entry {quoted(entry)} is a folder of the run folder: torchrun's agent, the launcher itself, "
                    "would import from it whatever torch imports (typing_extensions, numpy, ...), before any worker starts")
        if shadow := _shadows_a_launcher(dfd, entry, _STARTUP_MODULES):
            return (f"its PYTHONPATH entry {quoted(entry)} holds {quoted(shadow)}, which python imports at start-up or in place "
                    "of the launcher's package of that name (sixty-sixth round)")
    if reading.script and (why := _script_refusal(dfd, reading.script)):
        return why
    if reading.log_dir and (link := _a_link_on(dfd, reading.log_dir)):
        return (f"its --log-dir passes through {quoted(link)}, a link in the run folder: torchrun would write the workers' logs "
                "wherever it points (sixty-first round)")
    return None


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
            head = f.read(_HEAD)
            archive = zipfile.is_zipfile(f)
    finally:
        os.close(fd)
    if archive:
        return f"its script {quoted(script)} is a zip archive: python would run the __main__.py inside it, which the file does not show"
    if len(head) >= 4 and head[2:4] == b"\r\n" and 2900 <= int.from_bytes(head[:2], "little") < 4000:
        return f"its script {quoted(script)} is compiled bytecode (it opens with python's magic number), not source the person can read"
    if (coding := _source_encoding(head)) is not None:
        return (f"its script {quoted(script)} declares its source encoding {quoted(coding)}: python decodes it so, and a line an "
                "editor shows as a comment can run (utf-7's '+AAo-' is a newline); only UTF-8, ASCII and Latin-1 are restarted")
    # python puts the folder of the script's real path first on its import path (an absolute path may pass through links)
    folder = os.path.dirname(os.path.realpath(script if os.path.isabs(script) else f"/proc/self/fd/{dfd}/{script}"))
    if shadow := _shadows_a_launcher(dfd, folder):
        return (f"the script's folder holds {quoted(os.path.join(folder, shadow))}, which would be imported in place of the package "
                "of that name (the script's folder is first on its import path)")
    return None


# PEP 263's declaration, on the first or second line
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_PLAIN_CODECS = frozenset({"utf-8", "ascii", "latin-1", "iso8859-1"})
_LINE_END = re.compile(rb"\r\n|\r|\n")
_HEAD = 64 * 1024  # the bytes of a script read for its first two lines


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
                return None  # python refuses to run it
            return None if canonical in _PLAIN_CODECS else name
    return None


# top-level packages a launcher or its workers import in the run folder, where the folder comes first on the import path
_LAUNCHER_PACKAGES = frozenset({"deepspeed", "torch", "accelerate"})


# what python imports from its path at start-up, before the script
_STARTUP_MODULES = _LAUNCHER_PACKAGES | {"sitecustomize", "usercustomize"}


def _shadows_a_launcher(dfd: int, folder: str = ".", names: frozenset[str] = _LAUNCHER_PACKAGES) -> str | None:
    """A file or folder of `folder` (relative to the run folder `dfd`, or absolute) named like one of `names`, by default
    a launcher's package (`deepspeed/`, `torch.py`, `accelerate.pyc`)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY, dir_fd=dfd)
    except OSError:
        return None
    try:
        return next((n for n in sorted(os.listdir(fd)) if n.split(".", 1)[0] in names), None)
    except OSError:
        return None
    finally:
        os.close(fd)


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
