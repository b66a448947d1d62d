"""Tracker stores a run directory keeps beside its logs, read as the run's history.

A run directory handed over as the target is the whole run: its console log may show only a falling training
loss while the validation history that says the model is useless sits in the tracker's local store beside it.
Found within a few levels of the directory: an MLflow file store (`mlruns/<experiment>/<run>/`, read here as
the plain text files it is, without the SDK, which would create or migrate a store), W&B run folders
(`wandb/run-*`, `wandb/offline-run-*`, read by the W&B collector's local reader) and TensorBoard event files
(read by the TensorBoard collector). Read-only; a store that cannot be read is named, never fatal.
"""

from __future__ import annotations

import itertools
import math
import os
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from ml_skills.collectors import logfile, tracker
from ml_skills.errors import MLSkillsError
from ml_skills.models import CollectRequest, RawEvidence
from ml_skills.safety import paths
from ml_skills.safety.redact import redact

MAX_DEPTH = 4  # the store's own folder within this many levels of the run directory
MAX_RUNS = 2  # the newest runs of a store read; more are named
MAX_STORES = 16  # stores read from one run directory; more are named
MAX_METRIC_BYTES = 64 * 1024 * 1024  # read from one run's metric files together; the rest is named in missing
MAX_METRIC_LINES = 2_500_000  # lines read from one run's metric files together (a real line is ~28 bytes: 1M are 28 MiB)
MAX_KEY_DEPTH = 8  # folders below metrics/ or params/ (a key holding '/' is a folder)
MAX_PARAMS = 1_000  # param files read from one run; the rest are named
MAX_LISTED = 30_000  # names looked at below a run's metrics/ or params/ (3 times the metric files read), or in a folder
MAX_FOLDERS = 20_000  # folders of the run directory walked looking for stores (collectors/artifacts walks as many)
MAX_RUN_FOLDERS = 10_000  # run folders of a store looked into (for its meta.yaml and metrics/)
TB_MARK = "tfevents"  # collectors/tensorboard.MARK, without loading that reader to look for its files
_MLFLOW_STATUS = {"1": "running", "2": "scheduled", "3": "finished", "4": "failed", "5": "killed"}


class _Copyable(Protocol):
    def model_copy(self, *, update: dict[str, object]) -> CollectRequest: ...


def collect(root: Path, req: _Copyable) -> tuple[list[RawEvidence], list[str]]:
    """Every local tracker store under `root`: their raw evidence (metrics, state; their logs are left to the
    directory's own log scan), and notes on what could not be read."""
    found: list[RawEvidence] = []
    notes: list[str] = []
    stores = _stores(root, notes)
    if len(stores) > MAX_STORES:
        notes.append(f"{len(stores)} tracker stores under {root}: the first {MAX_STORES} read")
    for kind, path in stores[:MAX_STORES]:
        try:
            if kind == "mlflow":
                found.extend(tracker.to_evidence(r) for r in _mlflow_runs(path, notes))
            elif kind == "wandb":
                from ml_skills.collectors import wandb  # each reader loads only when its store is there

                found.append(wandb.collect(req.model_copy(update={"wandb": str(_wandb_run(path, notes))})))
            else:
                from ml_skills.collectors import tensorboard

                found.append(tensorboard.collect(req.model_copy(update={"tensorboard": str(path)})))
        except (MLSkillsError, OSError) as e:  # a folder that vanished or cannot be listed is a note too
            notes.append(f"{kind} store {path.name}: {redact(str(e))[:200]}; not read")
    for raw in found:
        raw.logs = []  # the run's console logs are among the directory's logs already
    return found, notes


def _wandb_run(store: Path, notes: list[str]) -> Path:
    """The store's latest-run link, or with none (copied without links, or synced elsewhere) its newest run folder:
    wandb names them run-YYYYMMDD_HHMMSS-id, so the last name is the newest."""
    if os.path.lexists(store / "latest-run"):
        return store
    runs = sorted((d for d in subdirs(store) if d.name.startswith(("run-", "offline-run-"))), key=lambda d: d.name.split("-", 2)[-1])
    if not runs:
        return store
    notes.append(f"wandb store {store.name} has no latest-run link: read its newest run folder, {runs[-1].name}")
    return runs[-1]


def _stores(root: Path, notes: list[str]) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    tb_dirs: set[Path] = set()
    for walked, (d, dirnames, filenames) in enumerate(paths.walk(root, MAX_DEPTH)):
        if walked >= MAX_FOLDERS:  # 150,000 empty folders within MAX_DEPTH took 5 s to walk (eleventh round)
            notes.append(f"over {MAX_FOLDERS:,} folders under {root}: tracker stores were looked for in the first {MAX_FOLDERS:,}")
            break
        if d.name == "mlruns":
            out.append(("mlflow", d))
            dirnames[:] = []
        elif d.name == "wandb" and any(n.startswith(("run-", "offline-run-")) for n in dirnames):
            out.append(("wandb", d))
            dirnames[:] = []
        elif any(TB_MARK in f for f in filenames) and not any(p in tb_dirs for p in d.parents):
            tb_dirs.add(d)
        dirnames[:] = [n for n in dirnames if not n.startswith(".")]
    return out + [("tensorboard", d) for d in sorted(tb_dirs)]


def _mlflow_runs(store: Path, notes: list[str]) -> list[tracker.TrackerRun]:
    """The newest runs of an MLflow file store: `<experiment>/<run>/meta.yaml` with `metrics/<key>` files of
    'timestamp_ms value step' lines (a key with '/' is a folder), `params/<name>` files holding the value."""
    folders: list[Path] = []
    left = [MAX_LISTED + 1]  # names looked at in all the experiments: 300 experiments of 1,000 run folders were each listed
    for e in subdirs(store):  # whole, 300,000 Paths built before the cut to 10,000 (twelfth round)
        if left[0] <= 0:
            break
        folders += subdirs(e, left)
    if len(folders) > MAX_RUN_FOLDERS or left[0] <= 0:  # 150,000 empty run folders took 5 s to look into (eleventh round)
        many = f"over {MAX_LISTED:,} names in its experiments" if left[0] <= 0 else f"{len(folders):,} run folders"
        notes.append(f"MLflow store {store}: {many}, the first {min(len(folders), MAX_RUN_FOLDERS):,} looked at")
    runs = [d for d in folders[:MAX_RUN_FOLDERS] if is_mlflow_run(d)]
    runs.sort(key=lambda d: (d / "meta.yaml").lstat().st_mtime, reverse=True)
    if len(runs) > MAX_RUNS:
        notes.append(f"MLflow store {store}: {len(runs)} runs, the {MAX_RUNS} newest read")
    return [mlflow_run(d) for d in runs[:MAX_RUNS]]


def is_mlflow_run(d: Path) -> bool:
    """A run folder of a file store: its meta.yaml a regular file and its metrics/ a folder, neither a symlink."""
    return _plain(d / "meta.yaml", stat.S_ISREG) and _plain(d / "metrics", stat.S_ISDIR)


def _plain(p: Path, kind: Callable[[int], bool]) -> bool:
    """Whether `p` is itself of that kind (a link is not followed: a store's `metrics -> /elsewhere` would list a folder
    outside the roots, and name its files in the notes; tenth round)."""
    try:
        return kind(p.lstat().st_mode)
    except OSError:
        return False


def subdirs(d: Path, left: list[int] | None = None) -> list[Path]:
    """The plain folders in `d` (no link), from the first MAX_LISTED names listed (or `left[0]`, which is lowered by the
    names listed): told apart by the entry's own type, with no Path built and no lstat for the others."""
    left = left if left is not None else [MAX_LISTED + 1]
    with os.scandir(d) as it:
        entries = list(itertools.islice(it, max(left[0], 0)))
    left[0] -= len(entries)
    names = [e.name for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
    return [d / n for n in sorted(names)]


def _files(top: Path, missing: list[str]) -> list[str]:
    """The regular files below `top` (a plain folder of the run), as paths relative to it: walked through held fds
    (paths.walk), no link followed, FIFOs and links left out; at most MAX_LISTED names looked at, the cut named in
    `missing`. Before the eleventh round every name was listed (and a Path built for it) before the caps on what is read
    applied: 300,000 empty metric files took 7 to 10 s, a million about 30."""
    out: list[str] = []
    real: Path | None = None
    left = MAX_LISTED
    for d, dirs, names in paths.walk(top, MAX_KEY_DEPTH):
        real = real or d  # the first folder walked is `top` itself, resolved
        rel, here = os.path.relpath(d, real), str(d)
        out.extend(n if rel == "." else os.path.join(rel, n) for n in names[:left] if _regular(os.path.join(here, n)))
        left -= len(names) + len(dirs)
        if left <= 0:
            missing.append(f"{top.name}: over {MAX_LISTED:,} names below it, the first {MAX_LISTED:,} looked at")
            break
    return sorted(out)


def _regular(p: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(p).st_mode)
    except OSError:
        return False


def mlflow_run(d: Path) -> tracker.TrackerRun:
    meta = _meta(paths.read_capped(d / "meta.yaml", 64 * 1024).decode("utf-8", "replace"))
    # named by its id, like a run of an MLflow server (collectors/mlflow.py): the run name is text whoever started the run
    # wrote, a fact, which the tools mark; as the source's name it came back bare (sixty-second round)
    run = tracker.TrackerRun(kind="mlflow", name=d.name)
    run.state = _MLFLOW_STATUS.get(meta.get("status", ""), meta.get("status") or None)
    run.facts["run id"] = d.name
    if meta.get("run_name"):
        run.facts["run name"] = meta["run_name"]
    run.facts["store"] = str(d.parent.parent)
    budget = [MAX_METRIC_BYTES, MAX_METRIC_LINES]  # shared by the run's metric files; the tracked ones are read first
    keys = sorted(_files(d / "metrics", run.missing), key=lambda k: (not tracker.tracked(k.replace("\\", "/")), k))
    if len(keys) > tracker.MAX_KEYS:  # names past these are not counted anyway (tracker.TrackerRun.add)
        run.missing.append(f"history: {len(keys):,} metric files, the first {tracker.MAX_KEYS:,} read (the loss, lr, grad-norm "
                           "and validation series first)")
        keys = keys[: tracker.MAX_KEYS]
    for key in keys:
        if not _metric(run, key, d / "metrics" / key, budget):
            run.missing.append(f"history of {key} and later keys: the run's metric files are over {MAX_METRIC_BYTES // 2**20} "
                               f"MiB or {MAX_METRIC_LINES:,} lines together; the rest was not read")
            break
    params = d / "params"
    names = _files(params, run.missing) if _plain(params, stat.S_ISDIR) else []
    if len(names) > MAX_PARAMS:
        run.missing.append(f"params: {len(names)} files, the first {MAX_PARAMS} read")
    for name in names[:MAX_PARAMS]:
        run.config[name] = paths.read_capped(params / name, 4096).decode("utf-8", "replace").strip()
    return run


def _metric(run: tracker.TrackerRun, key: str, f: Path, budget: list[int]) -> bool:
    """One metric file's points, streamed line by line (each line cut at 64 KiB) within the run's budget; False when the
    budget ran out. A 64 MiB file of 'ts v' lines held as one string and its split list took 1.3 GB and 31 s (tenth
    round)."""
    try:
        for raw in logfile.iter_lines(f, limit=budget[0] + 1):  # a 5 GB line of NULs is not read to its end
            if min(budget) <= 0:
                return False
            budget[0] -= len(raw) + 1
            budget[1] -= 1
            _point(run, key, raw.split())
    except MLSkillsError as e:
        run.missing.append(f"history of {key}: {e}")
    return min(budget) > 0


def _point(run: tracker.TrackerRun, key: str, parts: list[bytes]) -> None:
    if len(parts) < 2:
        return
    try:
        ts, value = int(parts[0]), float(parts[1])
        step = float(parts[2]) if len(parts) > 2 else 0.0
    except ValueError:
        return
    when = datetime.fromtimestamp(ts / 1000, UTC) if 0 < ts < 2**42 else None
    if math.isfinite(step):
        run.add(key.replace("\\", "/"), step, value, when)


def _meta(text: str) -> dict[str, str]:
    """The flat `key: value` lines of the store's meta.yaml (no YAML library needed, nothing nested is read)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep and k and not k.startswith((" ", "-")):
            out[k.strip()] = v.strip().strip("'\"")
    return out
