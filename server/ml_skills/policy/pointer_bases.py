"""The folders a resume pointer's relative content may be read from.

A pointer holding 'ckpts/ckpt-200.pt' is read by the run from wherever the run joins it: beside the pointer, or the run's
working folder (where its command.txt is and where a restart starts it), or the project root its scripts write under
('os.path.join(args.output_dir, name)' with a relative --output_dir). Before the thirty-fifth round only the pointer's
own folder was looked at: content valid from the working folder read as missing, the pointer was moved off it unasked,
and the new content was written relative to a folder the run's reader never uses."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from ml_skills.errors import MLSkillsError, TargetNotFound
from ml_skills.safety.paths import confine


def relative_bases(pointer: Path, roots: Sequence[Path]) -> list[Path]:
    """The pointer's folder, then each folder above it inside an allowed root (nearest first), then the roots."""
    out = [pointer.parent]
    for up in pointer.parent.parents:
        if not any(up.is_relative_to(r) for r in roots):
            break
        out.append(up)
    out += [r for r in roots if r not in out]
    return out


def candidates(pointer: Path, content: str, roots: Sequence[Path]) -> list[Path]:
    """Every path relative `content` names from one of relative_bases (an absolute one names itself)."""
    if content.startswith("/"):
        return [Path(content)]
    return [b / content for b in relative_bases(pointer, roots)]


def base_of(pointer: Path, content: str, roots: Sequence[Path]) -> Path:
    """The first of relative_bases from which `content` names something inside the roots, or else (the old target gone)
    the first from which its folder exists: the folder new content is written relative to, so the run's reader finds it
    where it looked for the old one ('outputs/exp1/step-200.safetensors' from the project root, 'ckpt-200.pt' beside
    the pointer); the pointer's folder when neither does."""
    bases = relative_bases(pointer, roots)
    for b in bases:
        if _inside(b / content, "any", roots):
            return b
    for b in bases:
        if _inside((b / content).parent, "dir", roots):
            return b
    return pointer.parent


def _inside(path: Path, want: Literal["any", "dir"], roots: Sequence[Path]) -> bool:
    try:
        confine(str(path), roots, want=want)
    except (MLSkillsError, OSError, RecursionError):
        return False
    return True


def names_only(pointer: Path, content: str, ckpt: Path, roots: Sequence[Path]) -> bool:
    """Whether relative `content` names `ckpt` or nothing from every one of relative_bases: only then is it written as
    it is; else the full path is, which every reader reads alike. A folder planted to steer base_of (thirty-sixth round:
    an empty 'ckpts/ckpts/' beside a pointer whose target was gone) made 'ckpt-100.pt' the new content, which from the
    run's folder named a planted pickle, not the checkpoint checked."""
    want = ckpt.resolve()
    for b in relative_bases(pointer, roots):
        try:
            found = confine(str(b / content), roots, want="any")
        except TargetNotFound:
            continue  # names nothing from there
        except (MLSkillsError, OSError, RecursionError):
            return False  # names something the server may not look at (through a link out of the roots): ambiguous
        if found != want:
            return False
    return True
