"""Tracker stores a run directory keeps beside its logs, read as the run's history.

A run directory handed over as the target is the whole run: its console log may show only a falling training
loss while the validation history that says the model is useless sits in the tracker's local store beside it.
Found within a few levels of the directory: an MLflow file store (`mlruns/<experiment>/<run>/`, read here as
the plain text files it is, without the SDK, which would create or migrate a store), W&B run folders
(`wandb/run-*`, `wandb/offline-run-*`, read by the W&B collector's local reader) and TensorBoard event files
(read by the TensorBoard collector). Read-only; a store that cannot be read is named, never fatal.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from ml_skills.collectors import tracker
from ml_skills.errors import MLSkillsError
from ml_skills.models import CollectRequest, RawEvidence
from ml_skills.safety import paths
from ml_skills.safety.redact import redact

MAX_DEPTH = 4  # the store's own folder within this many levels of the run directory
MAX_RUNS = 2  # the newest runs of a store read; more are named
MAX_METRIC_BYTES = 64 * 1024 * 1024  # one metric file of the MLflow store
TB_MARK = "tfevents"  # collectors/tensorboard.MARK, without loading that reader to look for its files
_MLFLOW_STATUS = {"1": "running", "2": "scheduled", "3": "finished", "4": "failed", "5": "killed"}


class _Copyable(Protocol):
    def model_copy(self, *, update: dict[str, object]) -> CollectRequest: ...


def collect(root: Path, req: _Copyable) -> tuple[list[RawEvidence], list[str]]:
    """Every local tracker store under `root`: their raw evidence (metrics, state; their logs are left to the
    directory's own log scan), and notes on what could not be read."""
    found: list[RawEvidence] = []
    notes: list[str] = []
    for kind, path in _stores(root):
        try:
            if kind == "mlflow":
                found.extend(tracker.to_evidence(r) for r in _mlflow_runs(path, notes))
            elif kind == "wandb":
                from ml_skills.collectors import wandb  # each reader loads only when its store is there

                found.append(wandb.collect(req.model_copy(update={"wandb": str(path)})))
            else:
                from ml_skills.collectors import tensorboard

                found.append(tensorboard.collect(req.model_copy(update={"tensorboard": str(path)})))
        except MLSkillsError as e:
            notes.append(f"{kind} store {path.name}: {redact(str(e))[:200]}; not read")
    for raw in found:
        raw.logs = []  # the run's console logs are among the directory's logs already
    return found, notes


def _stores(root: Path) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    tb_dirs: set[Path] = set()
    for d, dirnames, filenames in paths.walk(root, MAX_DEPTH):
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
    runs = [d for e in _subdirs(store) for d in _subdirs(e) if (d / "meta.yaml").is_file() and (d / "metrics").is_dir()]
    runs.sort(key=lambda d: (d / "meta.yaml").stat().st_mtime, reverse=True)
    if len(runs) > MAX_RUNS:
        notes.append(f"MLflow store {store}: {len(runs)} runs, the {MAX_RUNS} newest read")
    return [_mlflow_run(d) for d in runs[:MAX_RUNS]]


def _subdirs(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith("."))


def _mlflow_run(d: Path) -> tracker.TrackerRun:
    meta = _meta(paths.read_capped(d / "meta.yaml", 64 * 1024).decode("utf-8", "replace"))
    run = tracker.TrackerRun(kind="mlflow", name=meta.get("run_name") or d.name)
    run.state = _MLFLOW_STATUS.get(meta.get("status", ""), meta.get("status") or None)
    run.facts["run id"] = d.name
    run.facts["store"] = str(d.parent.parent)
    for f in sorted((d / "metrics").rglob("*")):
        if f.is_file() and not f.is_symlink():
            _metric(run, str(f.relative_to(d / "metrics")), f)
    params = d / "params"
    for f in sorted(params.iterdir()) if params.is_dir() else []:
        if f.is_file() and not f.is_symlink():
            run.config[f.name] = paths.read_capped(f, 4096).decode("utf-8", "replace").strip()
    return run


def _metric(run: tracker.TrackerRun, key: str, f: Path) -> None:
    try:
        text = paths.read_capped(f, MAX_METRIC_BYTES).decode("utf-8", "replace")
    except MLSkillsError as e:
        run.missing.append(f"history of {key}: {e}")
        return
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        try:
            ts, value = int(parts[0]), float(parts[1])
            step = float(parts[2]) if len(parts) > 2 else 0.0
        except ValueError:
            continue
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
