"""Inventory a run directory: configs, logs, checkpoints (with validity), failure artifacts.

The walk is bounded (depth and file count) so a huge output tree costs a bounded time. It goes
through held directory fds (safety/paths.walk), never follows symlinks out of the directory,
opens every file through safety/paths (a FIFO named `latest` or `command.txt` is skipped with
the reason, never waited on) and never opens anything for writing. Without active roots (a
library call) the directory itself is the root.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ml_skills.collectors.checkpoints import WEIGHT_SUFFIXES, inspect_dir, inspect_file, inspect_latest
from ml_skills.errors import InputError, TargetNotFound, UnreadableInput
from ml_skills.lazyre import lazy
from ml_skills.models import ArtifactInventory, CheckpointInfo
from ml_skills.safety import paths
from ml_skills.safety.redact import redact

MAX_FILES = 20_000
MAX_FOLDERS = 20_000  # folders walked, empty ones too
MAX_CHECKPOINT_DIRS = 200  # checkpoint folders inspected (the highest step numbers); the rest are counted in a note
MAX_DEPTH = 6
_CONFIG = lazy(r"(?i)^(train_args|training_args|args|config|hparams|deepspeed_config|ds_config|accelerate_config|trainer_state|params|hyperparams|cfg|launch)[\w.-]*\.(json|ya?ml|toml|cfg|ini|txt)$|\.(ya?ml)$")
_LOG = lazy(r"(?i)(\.log$|\.out$|\.err$|^nohup|^stdout|^stderr|^output\.txt$|^train.*\.txt$|^log.*\.txt$|^rank\d+.*\.txt$|^console)")
_FAILURE = lazy(r"(?i)(^error[\w.-]*\.json$|^core(\.\d+)?$|\.dmp$|^hs_err|^crash|traceback|\.stacktrace$|^stderr|torchelastic|^error_file|failure|^task[_-]?metadata)")
_CKPT_DIR = lazy(r"(?i)^(checkpoint[-_]?\d+|global_step\d+|step[-_]?\d+|epoch[-_=]?\d+|iter[-_]?\d+|ckpt[-_]?\d+|checkpoints?|last)$")
_COMMAND_FILES = ("command.txt", "cmd.txt", "launch.sh", "run.sh", "train.sh", "command")
MAX_SMALL_FILE = 64 * 1024  # a pointer or a command file; read no further
# the line of a command file that launches the training: `python3` and `python3.11` as well as `python` (a script run by
# `python3 train.py` had no launch command, and its `timeout` went unread), never a comment that names one
_LAUNCH_LINE = lazy(r"\b(python(?:\d+(?:\.\d+)?)?|torchrun|deepspeed|accelerate|srun)\b")


def inventory(root: str | os.PathLike[str]) -> ArtifactInventory:
    base = Path(root)
    if not base.exists():
        raise TargetNotFound(f"no directory at {base}")
    if not base.is_dir():
        raise UnreadableInput(f"{base} is not a directory")
    with paths.scope(base):
        return _inventory(base)


def _small_text(p: Path, inv: ArtifactInventory) -> str | None:
    """A pointer or command file's text; a FIFO, device or oversized file is skipped, and said so."""
    try:
        return paths.read_capped(p, MAX_SMALL_FILE).decode("utf-8", errors="replace")
    except InputError as e:
        inv.notes.append(f"{p.name} skipped: {e}")
        return None


def _inventory(base: Path) -> ArtifactInventory:
    inv = ArtifactInventory(root=str(base))
    ckpt_dirs: list[Path] = []
    pointers: list[Path] = []
    seen = 0
    base_real = paths.contain(base, "dir")
    for walked, (real_dir, dirnames, filenames) in enumerate(paths.walk(base_real)):
        if walked >= MAX_FOLDERS:  # empty folders count too: 150,000 of them took 7 s to walk (eleventh round)
            inv.truncated = True
            inv.notes.append(f"over {MAX_FOLDERS:,} folders under {base}: the walk stopped there")
            break
        d = base / real_dir.relative_to(base_real)
        if d != base and (".metadata" in filenames or any(n.endswith(".distcp") for n in filenames)):
            ckpt_dirs.append(d)  # a torch.distributed.checkpoint (FSDP) folder, whatever its name
            dirnames[:] = []
            continue
        depth = len(d.relative_to(base).parts)
        if depth >= MAX_DEPTH:
            dirnames[:] = []
        keep = []
        for name in sorted(dirnames):
            sub = d / name
            if _CKPT_DIR.match(name) and name.lower() not in ("checkpoints", "checkpoint"):
                ckpt_dirs.append(sub)
                continue  # inspected as a unit
            if name.startswith(".") or name in ("__pycache__", "node_modules"):
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            seen += 1
            if seen > MAX_FILES:
                inv.truncated = True
                break
            p = d / name
            if p.is_symlink():
                try:
                    p.resolve().relative_to(base_real)
                except (ValueError, OSError, RuntimeError):
                    inv.notes.append(f"{p.relative_to(base)} is a symlink leading out of {base}: not followed")
                    continue
            rel = str(p.relative_to(base))
            if name == "latest" or name == "latest_checkpointed_iteration.txt":
                text = _small_text(p, inv)
                if text is not None:
                    inv.latest_pointer = redact(text.strip())[:200]  # redacted, then cut (twelfth round)
                    pointers.append(p)
                continue
            if name in _COMMAND_FILES and inv.launch_command is None:
                text = _small_text(p, inv)
                if text is not None:
                    cmd = next((ln.strip() for ln in text[:4000].splitlines()
                                if not ln.lstrip().startswith("#") and _LAUNCH_LINE.search(ln)), None)
                    inv.launch_command = cmd
                    inv.launch_file = rel if cmd else None
            if name.endswith(WEIGHT_SUFFIXES) and not name.endswith(".index.json"):
                inv.checkpoints.append(inspect_file(p))
            elif _FAILURE.search(name):
                inv.failure_artifacts.append(rel)
                if _LOG.search(name):
                    inv.logs.append(rel)
            elif _LOG.search(name):
                inv.logs.append(rel)
            elif _CONFIG.search(name):
                inv.configs.append(rel)
        if inv.truncated:
            break
    if len(ckpt_dirs) > MAX_CHECKPOINT_DIRS:  # 50,000 empty checkpoint-N folders took 28 s and a 17 MB report (eleventh round)
        inv.notes.append(f"{len(ckpt_dirs):,} checkpoint folders: the {MAX_CHECKPOINT_DIRS:,} with the highest step numbers inspected")
        ckpt_dirs = sorted(ckpt_dirs, key=_step_number)[-MAX_CHECKPOINT_DIRS:]
    for cd in ckpt_dirs:
        inv.checkpoints.append(inspect_dir(cd))
    for p in pointers:
        inv.checkpoints.append(inspect_latest(p))
    inv.total_files = seen
    inv.newest_valid_checkpoint = newest_valid(inv.checkpoints)
    return inv


def _step_number(d: Path) -> tuple[int, str]:
    digits = re.search(r"\d{1,30}", d.name)
    return (int(digits.group()) if digits else -1, str(d))


def newest_valid(ckpts: list[CheckpointInfo]) -> str | None:
    valid = [c for c in ckpts if c.valid and c.format != "latest-pointer"]
    if not valid:
        return None
    return max(valid, key=lambda c: (c.step if c.step is not None else -1, c.mtime)).path
