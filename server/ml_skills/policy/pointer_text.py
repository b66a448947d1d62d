"""A resume pointer as a file: which files are pointers, reading one, what its content may name, and what to write.

Why it is its own module: each rule answers an attack on the pointer's text (a script or config named like a pointer,
quoted or structured content, a scheme, variable or share naming a place the server cannot look at, a link as the
pointer's own name); repoint.py judges the checkpoints and runs the action.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from ml_skills.collectors.checkpoints import tracker_iteration
from ml_skills.errors import PolicyError
from ml_skills.policy import pointer_bases
from ml_skills.policy.quoting import quoted
from ml_skills.safety.paths import confine

# Resume pointers: small text files naming the checkpoint to resume from (DeepSpeed `latest`,
# Megatron `latest_checkpointed_iteration.txt`, detectron2 `last_checkpoint`, resume_from.txt).
POINTER_NAME = re.compile(r"(?i)^(latest|last_checkpoint|resume)[\w.-]{0,64}$")
# What pointers are called (latest, latest_universal, last_checkpoint, resume_from.txt, Megatron's
# latest_checkpointed_iteration.txt): no extension, or .txt. resume.py, latest.sh, latest_config.yaml
# match the names too, and are a script, a program and a config.
POINTER_SUFFIXES = ("", ".txt")
MAX_POINTER_BYTES = 4096


# A pointer's content naming a place this machine cannot look at: a remote store (s3://, gs://, hf://, https://), a
# home-relative path its reader expands (~/ckpt), another system's drive. Its target is not known to be bad. Since the
# twentieth round also a variable its reader may expand (`$SCRATCH/step_2000`, `${CKPT_DIR}/...`, Windows' `%CKPT%`) and a
# Windows share (two backslashes first): each was read as a missing file beside the pointer, and moved off unasked.
# Since the seventy-fifth round also a scheme with no slash (fsspec's `file:ckpts/...`, `file:./...`, a chain such as
# `simplecache::ckpts/...`) and a path through /proc, /dev or /sys (`/proc/self/cwd/...` is the reader's working folder, not
# the server's): each was read as missing and moved off a valid checkpoint unasked. Since the seventy-seventh round also a
# glob or a brace its reader expands (`ckpt-2*.safetensors`, `ckpt-[2]00...`, `ckpt-{step}...`: `$(cat latest)` and
# glob.glob name the valid ckpt-200), read as a missing file of that name and moved off unasked.
ELSEWHERE = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]{0,31}:/|[A-Za-z][A-Za-z0-9+.-]{1,31}:(?=\S)|~|[A-Za-z]:[\\/]|\\\\|/+(?:proc|dev|sys)(?:/|$))"
                        r"|\$\{?[A-Za-z_]|%[A-Za-z_][A-Za-z0-9_]{0,63}%|[*?\[{]")


# Content starting or ending with one of these is JSON, a quoted string or a list, not a plain path.
STRUCTURED = frozenset("\"'{}[]")


def read(pointer: Path, dfd: int) -> tuple[str, os.stat_result]:
    """The pointer's text and stat, or a refusal when it is not a small, one-line, non-executable text file."""
    if not POINTER_NAME.match(pointer.name) or pointer.suffix.lower() not in POINTER_SUFFIXES:
        raise PolicyError(f"{quoted(str(pointer))} is not a resume pointer: repoint-checkpoint writes only a pointer file "
                          "(latest*, last_checkpoint, resume*, with no extension or .txt) holding a path; a script, config "
                          "or log named like one is never rewritten")
    fd = os.open(pointer.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PolicyError(f"{quoted(str(pointer))} is not a regular file")
        if st.st_mode & 0o111:
            raise PolicyError(f"{quoted(str(pointer))} is executable: a pointer holds a path, it is not a program")
        if st.st_size > MAX_POINTER_BYTES:
            raise PolicyError(f"{quoted(str(pointer))} is {st.st_size} bytes: a resume pointer holds one path")
        raw = os.read(fd, MAX_POINTER_BYTES + 1)
    finally:
        os.close(fd)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(f"{quoted(str(pointer))} is not text: not a resume pointer") from None
    if len([ln for ln in text.splitlines() if ln.strip()]) > 1 or any(not c.isprintable() for c in text.strip()):
        raise PolicyError(f"{quoted(str(pointer))} holds more than one line of text: not a resume pointer")
    if (cur := text.strip()) and (cur[0] in STRUCTURED or cur[-1] in STRUCTURED):
        # seventy-fourth round: `"ckpt-200"` (json.dump) or `{"checkpoint": ...}` was read as a file named with the quotes,
        # missing, so the pointer was moved off a valid checkpoint unasked, and rewritten as a plain path its reader cannot parse
        raise PolicyError(f"{quoted(str(pointer))} holds a quoted or structured value (JSON, a list), not a plain path: its "
                          "target cannot be judged and a plain path would break its reader; edit it with the tool that wrote it")
    return text, st


def new_content(pointer: Path, old: str, ckpt: Path, roots: Sequence[Path]) -> str:
    """What to write, in the pointer's own style: an iteration, a path relative to the folder the old content was read
    from (pointer_bases.base_of: beside the pointer, or the run's working folder above it), or a full path."""
    cur = old.strip()
    if pointer.name.startswith("latest_checkpointed"):  # Megatron's tracker: an iteration or 'release', never a path
        m = re.fullmatch(r"iter_(\d+)", ckpt.name)
        if ckpt.parent == pointer.parent and ckpt.name == "release":
            return "release\n"
        if ckpt.parent != pointer.parent or m is None:
            raise PolicyError(f"{quoted(pointer.name)} is a Megatron tracker file: the checkpoint must be an iter_N folder beside it")
        return f"{int(m.group(1))}\n"
    if cur and not cur.startswith("/") and ckpt.is_relative_to(base := pointer_bases.base_of(pointer, cur, roots)):
        rel = str(ckpt.relative_to(base))
        if pointer_bases.names_only(pointer, rel, ckpt, roots):
            return f"{rel}\n"
    return f"{ckpt}\n"


def current_targets(pointer: Path, old: str, roots: Sequence[Path]) -> list[Path]:
    """What the pointer may name now: a tracker's iteration folder, or its path read from every folder a run may join it
    to (pointer_bases.candidates)."""
    cur = old.strip()
    if not cur:
        return []
    it = tracker_iteration(pointer, cur)
    if it is not None:
        return [pointer.parent / f"iter_{it:07d}"]
    return pointer_bases.candidates(pointer, cur, roots)


def confined(given: str, roots: Sequence[Path]) -> Path:
    """The pointer, resolved inside the roots, refused when its own name is a link (not_a_link)."""
    not_a_link(given, roots)
    return confine(given, roots)


def not_a_link(given: str, roots: Sequence[Path]) -> None:
    """Refuse a pointer whose own name is a link. Every reader (DeepSpeed's load_dir/latest, Megatron's tracker, a join
    of the run folder and the content) resolves a relative content from the folder it read the pointer in; the server
    resolved it from the link target's folder, so a valid current target read 'missing' and a rollback ran unasked, and
    the new content named, for the readers, a file never inspected (thirty-second round)."""
    spelled = Path(given) if Path(given).is_absolute() else roots[0] / given
    if spelled.is_symlink():
        raise PolicyError(f"the pointer {quoted(str(spelled))} is a symbolic link: rewrite the file it links to, named "
                          "by its own path, so that its content is read from the folder its readers read it in")
