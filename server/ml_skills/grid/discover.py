"""Targets -> runs -> attempts to diagnose: directories of run directories, globs of logs.

The walk only lists directories and stats files (no file is opened), at most two levels under a
run, so finding 10,000 runs costs 10,000 small listings. A path that cannot be used (a symlink
loop, a dangling link, a directory that cannot be listed, outside the allowed roots) becomes a
task carrying its error, so it is reported as its own row and never lost.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ml_skills.collectors.attempts import attempts_of, has_log, newest_mtime, split_name
from ml_skills.collectors.attempts import entries as _entries
from ml_skills.collectors.attempts import is_log as _is_log
from ml_skills.collectors.attempts import isdir as _isdir
from ml_skills.errors import InputError, MLSkillsError, TargetNotFound
from ml_skills.grid.globs import MAX_LISTED, bounded_glob
from ml_skills.grid.models import AttemptTask

MAX_RUN_DIRS = 100_000  # entries of a target directory (a sweep's folder of runs): past it the triage says so
Check = Callable[[str], str]
"""Raises for a path that may not be read (the MCP tool's confinement); returns the path to use."""


@dataclass
class Discovery:
    runs: dict[str, list[AttemptTask]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped_old: int = 0
    skipped_no_log: list[str] = field(default_factory=list)
    capped: bool = False
    listing_cut: bool = False  # a target directory held more entries than were read

    def tasks(self) -> list[AttemptTask]:
        return [t for ts in self.runs.values() for t in ts]


def _broken(path: str) -> str | None:
    """Why a path cannot be used, or None: loops and dangling links are told apart from other errors. Under the MCP tools'
    roots a path is checked against them first (`_add_paths`): before the fifteenth round a link in the roots to a missing
    file outside answered "dangling symlink (to /outside/...)", naming where it leads, and a link to an existing one
    "outside the allowed roots": an existence oracle on any path (promise 5)."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == 40:  # ELOOP
            return f"{path} is a symlink loop"
        if os.path.islink(path):
            return f"{path} is a dangling symlink (to {os.readlink(path)})"
        return f"{path} cannot be read: {e.strerror or e}"
    return None


def allows(check: Check | None) -> Callable[[str], bool] | None:
    """`check` (the MCP tools' confinement) as a yes or no, for a glob's walk: a folder it refuses is not entered."""
    if check is None:
        return None

    def inside(path: str) -> bool:
        try:
            check(path)
        except MLSkillsError:
            return False
        return True

    return inside


def discover(targets: list[str], since: datetime | None = None, max_runs: int | None = None, check: Check | None = None,
             extra: dict[str, list[AttemptTask]] | None = None) -> Discovery:
    """Every run of the targets with its attempts (plus `extra` runs another source listed); raises
    when the targets name nothing at all."""
    found = Discovery()
    cut = since.timestamp() if since else None
    for name, tasks in (extra or {}).items():
        if not _add(found, name, sorted(tasks, key=lambda t: t.attempt), max_runs):
            break
    for target in targets:
        if glob.has_magic(target):
            matches, whole = bounded_glob(target, inside=allows(check))
            if not matches:
                found.notes.append(f"{target} matched nothing")
            if not whole:
                found.listing_cut = True
                found.notes.append(f"{target}: the glob was stopped after {len(matches):,} matches or {MAX_LISTED:,} directory "
                                   "entries; give narrower globs to triage the rest")
            _add_paths(found, matches, cut, max_runs, check, resubmissions=True)
            continue
        if not os.path.lexists(target):
            raise TargetNotFound(f"no file or directory at {target}: give a directory of run directories or a glob of logs")
        err = _broken(target)
        if err:
            _add(found, Path(target).name, [AttemptTask(run=Path(target).name, attempt=0, path=target, error=err)], max_runs)
            continue
        if check is not None:
            target = check(target)
        if not os.path.isdir(target):
            _add_paths(found, [target], cut, max_runs, check, resubmissions=False)
            continue
        try:
            entries = _entries(target, MAX_RUN_DIRS)  # not the 2,000 of a run's own folders: 2,500 runs once lost 500, unsaid
        except OSError as e:
            _add(found, Path(target).name, [AttemptTask(run=Path(target).name, attempt=0, path=target, error=f"{target} cannot be listed: {e.strerror or e}")], max_runs)
            continue
        if len(entries) >= MAX_RUN_DIRS:
            found.listing_cut = True
            found.notes.append(f"{target} holds more than {MAX_RUN_DIRS:,} entries: only {MAX_RUN_DIRS:,} were read; "
                               "give its subfolders or a glob to triage the rest")
        dirs = [e for e in entries if not e.name.startswith(".") and (_isdir(e) or _broken(e.path))]
        with_logs = [e for e in dirs if _broken(e.path) or has_log(e.path)]
        found.skipped_no_log += [e.name for e in dirs if e not in with_logs]
        loose = [e.path for e in entries if _is_log(e.name) and not _isdir(e) and not _broken(e.path)]
        if with_logs and all(split_name(e.name)[1] and not split_name(e.name)[0] for e in with_logs):
            tasks = [AttemptTask(run=Path(target).name, attempt=n, path=p) for n, p in attempts_of(target)]  # the target is one run
            _add(found, Path(target).name, tasks, max_runs, cut)
            continue
        _add_paths(found, [e.path for e in with_logs] + loose, cut, max_runs, check, resubmissions=True)
    if not found.runs and not found.skipped_old and not found.notes and targets:
        raise InputError(f"no runs under {', '.join(targets)}: give a directory of run directories (each holding a log), "
                         "a run directory of attempt-N/ folders, or a quoted glob of log files")
    if found.skipped_no_log:
        names = ", ".join(found.skipped_no_log[:5]) + (" ..." if len(found.skipped_no_log) > 5 else "")
        found.notes.append(f"{len(found.skipped_no_log)} directories hold no log and were not read as runs: {names}")
    if found.skipped_old:
        found.notes.append(f"{found.skipped_old} runs last written before --since were left out")
    return found


def _add_paths(found: Discovery, paths: list[str], cut: float | None, max_runs: int | None, check: Check | None, resubmissions: bool) -> None:
    """Run directories and log files; with `resubmissions`, `cell-retry1` joins `cell` as its attempt 1."""
    cells: dict[str, list[AttemptTask]] = {}
    for p in paths:
        name = Path(p).name
        key, n = split_name(name) if resubmissions else (name, 0)
        if not os.path.isdir(p) and key.endswith(tuple(_SUFFIXES)):
            key = key.rsplit(".", 1)[0] if "." in key else key
        err = None
        if check is not None:  # the roots first: a link out of them gets their one answer, whether its target exists or not
            try:
                p = check(p)
            except MLSkillsError as e:
                err = str(e)
        err = err or _broken(p)
        if err is not None:
            cells.setdefault(key, []).append(AttemptTask(run=key, attempt=n, path=p, error=err))
        elif os.path.isdir(p):
            sub = attempts_of(p)
            cells.setdefault(key, []).extend(AttemptTask(run=key, attempt=(n * 1000 + a if a else n) if n else a, path=q) for a, q in sub)
        else:
            cells.setdefault(key, []).append(AttemptTask(run=key, attempt=n, path=p))
    for key, tasks in cells.items():
        if not _add(found, key, sorted(tasks, key=lambda t: t.attempt), max_runs, cut):
            break


_SUFFIXES = (".log", ".out", ".err", ".txt")


def _add(found: Discovery, name: str, tasks: list[AttemptTask], max_runs: int | None, cut: float | None = None) -> bool:
    """Add a run unless it is older than --since; False once the run cap is reached."""
    if max_runs is not None and len(found.runs) >= max_runs:
        found.capped = True
        return False
    if cut is not None and all(t.error is None for t in tasks):
        newest = max((m for t in tasks if (m := newest_mtime(t.path)) is not None), default=None)
        if newest is not None and newest < cut:
            found.skipped_old += 1
            return True
    base, i = name, 2
    while name in found.runs:
        name = f"{base}~{i}"
        i += 1
    found.runs[name] = [t.model_copy(update={"run": name}) for t in tasks]
    return True


def parse_since(text: str) -> datetime:
    """'3h', '2d', '45m' ago, or an ISO date/time (UTC when it has no offset)."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if m:
        secs = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        try:  # 99999999999999999999d is before year 1: not a time
            return datetime.fromtimestamp(datetime.now(UTC).timestamp() - secs, UTC)
        except (OverflowError, ValueError, OSError):
            raise InputError(f"--since {text!r} reaches before year 1: give a duration like 6h, 2d, 30m, or a date") from None
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"--since {text!r}: give a duration like 6h, 2d, 30m, or a date like 2026-11-30 or 2026-11-30T14:00") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)
