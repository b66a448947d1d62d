"""Paths and storage: what is at the path an error names, the space, mount and kernel errors where the run
writes, a corrupt checkpoint's first bytes.
"""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath

from ml_skills.lazyre import lazy
from ml_skills.models import FailureClass

_STORAGE_WRITE = lazy(r"(?i)file write failed|unexpected pos \d+|iostream error|cannot be opened|write\(\): fd \d+ failed|"
                      r"Input/output error|\[Errno 5\]|save failed")
_EIO = lazy(r"(?i)Input/output error|\[Errno 5\]|\bEIO\b")
# Python quotes a path that holds a ' with "
_ERRNO_PATH = lazy(r"\[Errno \d+\] [^:\n]{3,60}: (?:'([^'\n\r]{1,300})'|\"([^\"\n\r]{1,300})\")|"
                   r"\bFile (/?[\w.~@+=-]+(?:/[\w.~@+=-]+)+) cannot be opened")
_CAN_NOT_OPEN = lazy(r"can't open file '([^'\n\r]{1,300})'")
_NOT_FOUND_IN = lazy(r"(?i)(?:No \w+ found in|nonexistent paths?:? \[?'?|does not exist(?: in)?:? '?|Dataset does not exist:)\s*"
                     r"'?(/?[\w.~@+=-]+(?:/[\w.~@+=-]*)+|/[\w.~@+=-]+)'?")
_BARE_MISSING = lazy(r"No such file or directory: '([\w.+-]{1,80})'")
_NOT_IN_PATH = lazy(r"(?:^|\s)(?:sh: \d+: )?([\w.+-]{1,60}): (?:command )?not found\b")
_CKPT_FILE = lazy(r"['\"(\s=](/?[\w.~@+=-]+(?:/[\w.~@+=-]+)*\.(?:pt|pth|ckpt|bin|safetensors|pkl|pickle|h5|keras|npz|msgpack))\b['\")]?")
# where a checkpoint path may start (a quote, a parenthesis, a space or '='), and the longest path from a place
_CKPT_START = lazy(r"['\"(\s=]")
_PATH_PREFIX = lazy(r"/?[\w.~@+=-]++(?:/[\w.~@+=-]++)*+")
_CORRUPT = lazy(r"(?i)invalid load key|failed finding central directory|unexpected EOF|file might be corrupted|EOF read where object|"
                r"Ran out of input|not a zip file|HeaderTooLarge|truncated")


def checkpoint_file(line: str) -> str | None:
    """The checkpoint path `_CKPT_FILE.search(line)` finds, trying only the starts that can be its leftmost.

    '=' both starts a path and is part of one: searched, every '=' of a run of them read the run to its end, and 80 lines
    of 2,000 '=' above a corrupt checkpoint's error held the CLI 13 s (twenty-fourth round). An '=' inside the path a failed
    start reads ('x=a/b=c', the second '=') starts no path either: any path after it extends the failed start's."""
    failed_to = -1  # the last character of the longest path after the last start that found none
    for c in _CKPT_START.finditer(line):
        i = c.start()
        if line[i] == "=" and i <= failed_to:
            continue
        if (m := _CKPT_FILE.match(line, i)) is not None:
            return m.group(1)
        p = _PATH_PREFIX.match(line, i + 1)
        failed_to = p.end() - 1 if p is not None else i
    return None


def _dir_of(path: str) -> str:
    p = PurePosixPath(path)
    return str(p.parent) if p.suffix else path


def paths(text: str, frames: list[tuple[str, int, str]], tail: list[str], above: list[str], primary: FailureClass | None) -> list[str]:
    out: list[str] = []
    if (m := _CAN_NOT_OPEN.search(text)) is not None:
        p = m.group(1)
        out.append(f"ls -la {shlex.quote(p)}; ls -la {shlex.quote(_dir_of(p))} | head -20   # is the script there, for the job's "
                   "user, on the node the job ran on?")
        return out
    started = any("subprocess" in f or fn == "_execute_child" for f, _, fn in frames)
    if (m := _BARE_MISSING.search(text)) is not None and started:
        out.append(f"command -v {shlex.quote(m.group(1))} || echo \"not on PATH=$PATH\"   # the program the run started is not installed "
                   "or not on the job's PATH")
        return out
    if (m := _ERRNO_PATH.search(text)) is not None:
        p = m.group(1) or m.group(2) or m.group(3)
        d = _dir_of(p)
        if _EIO.search(text) or _STORAGE_WRITE.search(text):
            out.append(f"df -h {shlex.quote(d)}; findmnt -T {shlex.quote(d)}; dmesg -T | grep -i -E 'I/O error|EXT4-fs|XFS|nfs|fuse' | tail -5"
                       "   # space, mount and the kernel's storage errors for that path")
        elif d in (p, ".", "/"):
            out.append(f"ls -la {shlex.quote(p)}   # what is at the path now, from the run's working directory")
        else:
            out.append(f"ls -la {shlex.quote(p)}; ls -ld {shlex.quote(d)}   # what is at the path now (owner, mode, a left-over)")
        return out
    if (m := _NOT_FOUND_IN.search(text)) is not None:
        p = m.group(1)
        out.append(f"ls -la {shlex.quote(p)} | head -20   # what is at the path the run looked in, from its working directory")
        return out
    if (m := _BARE_MISSING.search(text)) is not None:
        out.append(f"ls -la {shlex.quote(m.group(1))}   # from the run's working directory: the file it opened by that name")
        return out
    if (m := _NOT_IN_PATH.search(text)) is not None:
        name = m.group(1)
        out.append(f"command -v {shlex.quote(name)} || echo \"not on PATH=$PATH\"   # the program the step runs is not installed "
                   "in its image or not on its PATH")
        return out
    if _CORRUPT.search(text) and primary in (FailureClass.IO_CHECKPOINT, FailureClass.DATA_PIPELINE, None):
        ckpt = next((c for line in reversed([*tail, *above]) if (c := checkpoint_file(line)) is not None), None)
        if ckpt:
            q = shlex.quote(ckpt)
            out.append(f"ls -la {q}; head -c 64 {q} | od -c | head -4   # its size, and its first bytes: a torch zip starts with PK, "
                       "'<' is an HTML page, 'version https://git-lfs' an LFS pointer")
            return out
    if primary is FailureClass.IO_CHECKPOINT and _STORAGE_WRITE.search(text):
        if _EIO.search(text):
            out.append("dmesg -T | grep -i -E 'I/O error|EXT4-fs|XFS|nfs|fuse|blk_update' | tail -5; df -h .   # the kernel's storage "
                       "errors around the failure, and the space left where the run writes")
        else:
            out.append("df -h . ${TMPDIR:-/tmp}; df -i .   # space and inodes left where the run writes its checkpoints")
    return out
