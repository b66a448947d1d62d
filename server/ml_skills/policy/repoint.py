"""Repointing a resume pointer: the one action that writes a file in a run folder.

Why it is its own module: every check here answers an attack on the pointer (a link, a folder
swapped between prompt and act, a name the question would cut or mask, a pointer moved off a
checkpoint that may be good, which makes it a rollback that asks). The prepared action re-checks
everything after the approval and writes through a held folder descriptor, keeping the old
content in out_dir/repoint-backups.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shlex
import stat
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ml_skills.collectors.checkpoints import NO_WEIGHTS, WEIGHT_SUFFIXES, inspect_dir, inspect_file, unverified
from ml_skills.errors import MLSkillsError, PolicyError, TargetNotFound
from ml_skills.models import ActionKind, CheckpointInfo, Model
from ml_skills.policy import pointer_text
from ml_skills.policy.prepared import Prepared, held_dir
from ml_skills.policy.quoting import QUOTED_LIMIT, decoded, masked, named_outside_ascii, quoted
from ml_skills.safety import paths
from ml_skills.safety.invisible import hidden_characters
from ml_skills.safety.paths import confine, open_out_dir
from ml_skills.safety.redact import redact


class RepointCheckpoint(Model):
    """Point a resume pointer file at an existing, structurally valid checkpoint (undoable: the old content is kept)."""

    kind: Literal["repoint-checkpoint"] = "repoint-checkpoint"
    pointer_file: str = Field(description="Resume pointer to rewrite: a small one-line text file named latest*, last_checkpoint "
                                          "or resume* (e.g. 'latest', resume_from.txt), inside the allowed roots.")
    checkpoint: str = Field(description="Existing checkpoint inside the allowed roots whose structure inspects valid: a safetensors, "
                                        "torch zip or HDF5 file, or a DeepSpeed, FSDP or sharded folder.")


VERIFIED_FILE_FORMATS = {"safetensors", "torch-zip", "hdf5"}
VERIFIED_DIR_FORMATS = {"fsdp-dcp", "deepspeed", "sharded", "dir"}
MAX_CHECKPOINT_FILES = 2000


def _write_backup(backup: Path, text: str, mode: int) -> None:
    """Create the backup as a new file in out_dir/repoint-backups, never through a link: the out dir is
    the first allowed root by default, where anyone who writes runs could plant `repoint-backups` -> elsewhere."""
    ofd = open_out_dir(backup.parent.parent)
    try:
        try:
            os.mkdir(backup.parent.name, 0o700, dir_fd=ofd)
        except FileExistsError:
            pass
        try:
            bfd = os.open(backup.parent.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=ofd)
        except OSError as e:
            raise PolicyError(f"{quoted(str(backup.parent))} is not a plain directory ({e.strerror or e}): the old pointer "
                              "cannot be kept, so nothing was written") from None
        try:
            fd = os.open(backup.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=bfd)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                os.fchmod(fh.fileno(), mode)
        finally:
            os.close(bfd)
    finally:
        os.close(ofd)


def _verified(ckpt: Path) -> CheckpointInfo:
    """Structural inspection (never unpickled): a known format, valid, made of plain files only; a folder that cannot be
    walked (nested past the longest path the system takes, unreadable) is refused, never an unexpected failure."""
    try:
        return _inspected(ckpt)
    except OSError as e:
        raise PolicyError(f"{quoted(str(ckpt))} cannot be inspected ({e.strerror or type(e).__name__}): not a checkpoint "
                          "whose structure can be verified") from None


def _inspected(ckpt: Path) -> CheckpointInfo:
    if ckpt.is_dir():
        files = []
        for p in paths.below(ckpt):  # bounded, and before inspect_dir walks it: a pointer may name a huge (or deep) tree
            if p.is_symlink():
                raise PolicyError(f"{quoted(str(ckpt))} holds a symlink ({quoted(p.name)}): a repoint target must be plain files")
            files.append(p)
            if len(files) > MAX_CHECKPOINT_FILES:
                raise PolicyError(f"{quoted(str(ckpt))} holds more than {MAX_CHECKPOINT_FILES} files: not a checkpoint folder")
        info = inspect_dir(ckpt)
        weights = [inspect_file(p) for p in files if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES) and not p.name.endswith(".index.json")]
        unknown = next((w for w in weights if w.format not in VERIFIED_FILE_FORMATS), None)
        known = info.format in VERIFIED_DIR_FORMATS and unknown is None
    else:
        info = inspect_file(ckpt)
        unknown = None
        known = info.format in VERIFIED_FILE_FORMATS
    if not info.valid:
        raise PolicyError(f"{quoted(str(ckpt))} is not a valid checkpoint ({info.reason}): pick one list_artifacts reports valid")
    if not known:
        what = f"{quoted(Path(unknown.path).name)} is {unknown.format}" if unknown else f"its format is {info.format}"
        raise PolicyError(f"{quoted(str(ckpt))} is not a checkpoint whose structure can be verified ({what}; known: "
                          f"{', '.join(sorted(VERIFIED_FILE_FORMATS))} files, DeepSpeed, FSDP and sharded folders)")
    return info


def _resolved(p: Path) -> Path | None:
    """`p` resolved, or None when it cannot be (twenty-first round: a pointer naming a link loop made `resolve` raise
    RuntimeError, and the repoint "failed unexpectedly"); such a target is then judged by `_may_be_good`."""
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return None


def _may_be_good(cur: Path, roots: Sequence[Path]) -> bool:
    """Whether the pointer's current target may be a checkpoint worth resuming from. Only a target that is
    missing, or that inspects invalid, may be moved off without asking: one whose format cannot be verified (a
    legacy pickle, a header or zip directory too big to check), a folder holding a link or too many files, or one
    outside the roots is not known to be bad, so leaving it is a rollback. Before, only a target that passed
    `_verified` counted, and a pointer on a valid legacy-pickle checkpoint, on a folder whose weight file is a link, or
    (thirty-first round) on a loadable safetensors file with a 17 MiB header, was moved to an older one unasked.

    Missing is judged by the confinement rule itself, never by looking outside the roots: an lstat of a target outside
    them made the answer (ask, or run) tell whether a file exists there (thirty-first round)."""
    try:
        real = confine(str(cur), roots, want="any")
    except TargetNotFound:
        return False  # nothing there, inside the roots
    except (MLSkillsError, OSError, RecursionError):
        return True  # outside the roots, unreadable, a folder the server cannot search: ask rather than assume it is bad
    try:
        if real.is_dir():
            n, holds_data = 0, False
            for top, _dirs, files, fd in os.fwalk(real):
                n += len(files) + len(_dirs)
                if n > MAX_CHECKPOINT_FILES or (_dirs and len(Path(top).relative_to(real).parts) >= paths.MAX_WALK_DEPTH):
                    return True  # too big or too deep to judge here (os.fwalk recurses once per level): ask
                holds_data = holds_data or any(_non_empty(f, fd) for f in files)
            info = inspect_dir(real)
            if info.valid is False and info.format == "dir" and info.reason == NO_WEIGHTS and holds_data:
                # files of a format the inspector does not know (an orbax or zarr checkpoint, GGUF, ONNX): not known
                # to be bad. Before the eighth round a pointer on an orbax checkpoint was moved off it unasked.
                return True
            return info.valid is not False or unverified(info)
        info = inspect_file(real)
        return info.valid is not False or unverified(info)
    except (MLSkillsError, OSError, RecursionError):  # RecursionError: inspect_dir, should it ever walk deeper than the walk here
        return True  # cannot look: ask rather than assume it is bad


def _non_empty(name: str, dir_fd: int) -> bool:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > 0


def _ckpt_identity(info: CheckpointInfo, path: Path) -> dict[str, Any]:
    """What the approval is bound to: format, size, mtime and the file's inode (seventy-sixth round: another valid file of
    the same size and mtime moved in while the person read the question was taken for the one inspected)."""
    try:
        inode = os.stat(path, follow_symlinks=False).st_ino
    except OSError:
        inode = None
    return {"format": info.format, "size": info.size_bytes, "mtime": info.mtime.isoformat(), "inode": inode}


def prepare_repoint(a: RepointCheckpoint, roots: Sequence[Path], out_dir: Path) -> Prepared:
    pointer = pointer_text.confined(a.pointer_file, roots)
    ckpt = confine(a.checkpoint, roots, want="any")
    if ckpt == pointer:
        raise PolicyError("the pointer cannot point at itself")
    dfd = held_dir(pointer, roots)
    try:
        old, st = pointer_text.read(pointer, dfd)
    finally:
        os.close(dfd)
    info = _verified(ckpt)
    new = pointer_text.new_content(pointer, old, ckpt, roots)
    if hidden_characters(new.strip()) or any(not c.isprintable() for c in new.strip()):
        raise PolicyError(f"the checkpoint's path {quoted(str(ckpt))} holds a line break, an escape or an invisible character: "
                          "written into the pointer it would make it more than the one line of text a pointer is; rename it")
    for what, text in (("pointer's path", str(pointer)), ("new pointer content", new.strip()), ("checkpoint's path", str(ckpt))):
        if quoted(text).endswith('..."') and not text.endswith("..."):  # the question would cut it: the person never sees the end
            raise PolicyError(f"the {what} is too long to show whole in the question ({len(text)} characters, over "
                              f"{QUOTED_LIMIT}): a cut name cannot be approved; use a shorter path")
        if masked(text):  # thirteenth round: a name the question masks cannot be approved either
            raise PolicyError(f"the {what} holds what reads as a secret, which the question would show as [REDACTED]: a hidden "
                              "name cannot be approved; rename it")
        if decoded(text):  # sixteenth round: `ck\u0061.pt` read as `cka.pt`
            raise PolicyError(f"the {what} holds a JSON escape or an HTML character reference the question would show decoded: "
                              "the person would approve another name; rename it")
    also: list[ActionKind] = []
    if pointer_text.ELSEWHERE.search(old.strip()):  # before the ninth round `s3://bucket/step-2000` was "missing": moved off it unasked
        also.append(ActionKind.ROLLBACK)
    elif any(_resolved(cur) != ckpt and _may_be_good(cur, roots) for cur in pointer_text.current_targets(pointer, old, roots)):
        also.append(ActionKind.ROLLBACK)  # moving a pointer off what may be a good checkpoint is a rollback (asks by default)
    identity = {"pointer_sha256": hashlib.sha256(old.encode()).hexdigest(), "pointer_mode": st.st_mode, "pointer_inode": st.st_ino,
                "checkpoint": _ckpt_identity(info, ckpt)}
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    backup = out_dir / "repoint-backups" / f"{stamp}-{pointer.name}"

    def run() -> str:
        # Everything is checked again now, after the approval: the pointer and the checkpoint may have changed meanwhile.
        p_now = pointer_text.confined(a.pointer_file, roots)
        c_now = confine(a.checkpoint, roots, want="any")
        info_now = _verified(c_now)
        dfd = held_dir(p_now, roots)  # everything below goes through this fd: the folder checked is the one written
        try:
            old_now, st_now = pointer_text.read(p_now, dfd)
            if (p_now, c_now) != (pointer, ckpt) or old_now != old or (st_now.st_mode, st_now.st_ino) != (st.st_mode, st.st_ino) \
                    or _ckpt_identity(info_now, c_now) != identity["checkpoint"]:
                raise PolicyError(f"{quoted(str(pointer))} or {quoted(str(ckpt))} changed since the action was prepared: "
                                  "nothing was written")
            _write_backup(backup, old, stat.S_IMODE(st.st_mode))
            tmp = f".repoint.{secrets.token_hex(8)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(new)
                    fh.flush()
                    os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
                    os.fsync(fh.fileno())
                os.replace(tmp, pointer.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except FileNotFoundError:
                    pass
                raise
        finally:
            os.close(dfd)
        return (f"{pointer} now holds {new.strip()} (was: {redact(old.strip())[:200] or 'empty'}); the old content is kept in {backup}; "
                f"undo: cp {shlex.quote(str(backup))} {shlex.quote(str(pointer))}")

    was = quoted(old.strip(), 300) if old.strip() else "(empty)"
    return Prepared(
        action=a, kind=ActionKind.REPOINT_CHECKPOINT, target=str(pointer),
        summary=f"rewrite the resume pointer {quoted(str(pointer))} (now {was}) to {quoted(new.strip())}, the checkpoint "
                f"{quoted(str(ckpt))} ({info.format}, valid: {quoted(info.reason, 200)})" + named_outside_ascii(str(pointer), new, str(ckpt)),
        impact="the next resume starts from this checkpoint; nothing is deleted" + ("; the pointer named a valid checkpoint, so "
                                                                                    "this rolls the resume point back" if also else ""),
        undo=f"the old content is kept in {backup}: cp {shlex.quote(str(backup))} {shlex.quote(str(pointer))} (it held: {redact(old.strip())[:200] or '(empty)'})",
        manual=f"printf '%s\\n' {shlex.quote(new.strip())} > {shlex.quote(str(pointer))}", identity=identity, run=run, also=also,
    )
