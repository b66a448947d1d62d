"""triage-runs: every attempt of every run through the engine in a process pool, grouped as it finishes.

At most 2 x workers attempts are in flight, and each comes back as a small record, so memory
follows the number of workers, not the number of runs. A run's row is filled in the moment its
last attempt is back; `on_run` hears about each one (the CLI's progress line). With one worker
the attempts run in this process, with no pool to start.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from datetime import UTC, datetime

from ml_skills import __version__
from ml_skills.grid.discover import Check, discover
from ml_skills.grid.groups import Groups, run_of
from ml_skills.grid.models import AttemptRecord, AttemptTask, Group, RunRecord, TriageReport
from ml_skills.grid.record import diagnose_attempt
from ml_skills.grid.wandb_runs import FAILED_STATES
from ml_skills.models import ToolInfo
from ml_skills.policy.rules import Policy, to_wire
from ml_skills.safety import paths

OnRun = Callable[[RunRecord, Group, Groups, int], None]
"""on_run(run, its group, all groups so far, runs in total): called as each run is complete."""


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _pool(workers: int) -> ProcessPoolExecutor:
    # forkserver: workers start from a clean process, never a fork of a threaded one (the MCP server runs tools in threads)
    method = "forkserver" if sys.platform.startswith("linux") else "spawn"
    _start_helpers_safely(method)
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method), initializer=_worker_started)


def _worker_started() -> None:
    """Run the worker's exit handlers when it ends. A pool worker leaves through os._exit, past the atexit handlers: the
    temporary folders `import wandb` makes (`tmp*wandb-media`, `tmp*wandb-artifacts`) were left in TMPDIR by every
    triage of a folder holding a W&B run (seventy-fourth round). multiprocessing's own finalizers do run then."""
    import atexit
    from multiprocessing import util

    util.Finalize(None, atexit._run_exitfuncs, exitpriority=0)


_HELPERS_LOCK = threading.Lock()


def _start_helpers_safely(method: str) -> None:
    """Start multiprocessing's helper processes with no working folder on their import path.

    The forkserver and the resource tracker are started as `python -c ...`, which puts the working folder first on the
    import path before they import selectors, socket, pickle (which probes `org`) and more; the server's and the CLI's
    working folder is a run folder, so a module planted there ran in them, and in every worker forked from the
    forkserver (thirty-second round). PYTHONSAFEPATH is set only while they start: a restart the server runs later must
    import the run's own modules."""
    if method != "forkserver":
        return
    from multiprocessing import forkserver, resource_tracker

    with _HELPERS_LOCK:
        old = os.environ.get("PYTHONSAFEPATH")
        os.environ["PYTHONSAFEPATH"] = "1"
        try:
            resource_tracker.ensure_running()
            forkserver.ensure_running()
        finally:
            if old is None:
                os.environ.pop("PYTHONSAFEPATH", None)
            else:
                os.environ["PYTHONSAFEPATH"] = old


def _run_local(tasks: list[AttemptTask], workers: int, deadline: float | None) -> Iterator[AttemptRecord]:
    """Records in the order they finish; stops submitting at the deadline (what is running is let finish)."""
    if workers <= 1:
        for one in tasks:
            if deadline is not None and time.monotonic() > deadline:
                return
            yield diagnose_attempt(one)
        return
    pool = _pool(workers)
    pending: set[Future[AttemptRecord]] = set()
    todo = iter(tasks)
    try:
        while True:
            while len(pending) < 2 * workers and (deadline is None or time.monotonic() < deadline):
                nxt = next(todo, None)
                if nxt is None:
                    break
                pending.add(pool.submit(diagnose_attempt, nxt))
            if not pending:
                return
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
            for f in done:
                yield f.result()
            if not done and deadline is not None and time.monotonic() >= deadline:
                return
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # only what is already running is let finish


def _mlflow(experiments: tuple[str, ...], since: datetime | None, max_runs: int | None) -> dict[str, list[AttemptTask]]:
    if not experiments:
        return {}
    from ml_skills.grid.mlflow_runs import failed_runs

    runs: dict[str, list[AttemptTask]] = {}
    for exp in experiments:
        for t in failed_runs(exp, since, max_runs):
            runs.setdefault(t.run, []).append(t)
    return runs


def _wandb(projects: tuple[str, ...], since: datetime | None, max_runs: int | None, states: tuple[str, ...]) -> dict[str, list[AttemptTask]]:
    if not projects:
        return {}
    from ml_skills.grid.wandb_runs import project_runs

    runs: dict[str, list[AttemptTask]] = {}
    for project in projects:
        for t in project_runs(project, since, max_runs, states):
            runs.setdefault(t.run if len(projects) == 1 else f"{project}/{t.run}", []).append(t)  # two projects may share a cell name
    return runs


def triage(targets: list[str], *, since: datetime | None = None, workers: int | None = None, max_runs: int | None = None,
           deadline_s: float | None = None, check: Check | None = None, on_run: OnRun | None = None,
           keep_runs: bool = True, mlflow_experiments: tuple[str, ...] = (), wandb_projects: tuple[str, ...] = (),
           wandb_states: tuple[str, ...] = FAILED_STATES, ray_address: str | None = None,
           policy: Policy | None = None) -> tuple[TriageReport, Groups]:
    """Diagnose every run of the targets (and of the MLflow experiments' and W&B projects' failed runs)
    with the engine and group the failures by fingerprint; `policy` rates each run's fixes (default: the shipped one)."""
    t0 = time.monotonic()
    deadline = t0 + deadline_s if deadline_s else None
    extra = _mlflow(mlflow_experiments, since, max_runs)
    for name, ts in _wandb(wandb_projects, since, max_runs, wandb_states).items():
        extra[name if name not in extra else f"{name}~wandb"] = ts  # an MLflow run of the same name stays its own
    found = discover(targets, since=since, max_runs=max_runs, check=check, extra=extra)
    tasks = found.tasks()
    active = paths.active_roots()
    if active is not None:  # the caller's roots go with each task to the worker that reads it
        tasks = [t.model_copy(update={"roots": [str(r) for r in active]}) for t in tasks]
    if policy is not None:  # so does the policy: a worker rates fixes as the caller's report would
        wire = to_wire(policy)
        tasks = [t.model_copy(update={"policy": wire}) for t in tasks]
    if ray_address:
        from ml_skills.grid import ray_backend

        workers = ray_backend.connect(ray_address)
        records = ray_backend.run(tasks, workers, deadline)
        backend = "ray"
    else:
        workers = max(1, min(workers or default_workers(), len(tasks) or 1))
        records = _run_local(tasks, workers, deadline)
        backend = "inline" if workers == 1 else "local"
    waiting = {name: len(ts) for name, ts in found.runs.items()}
    got: dict[str, list[AttemptRecord]] = {}
    groups = Groups()
    for rec in records:
        got.setdefault(rec.run, []).append(rec)
        if len(got[rec.run]) == waiting[rec.run]:
            run, last = run_of(rec.run, got.pop(rec.run))
            g = groups.add(run, last)
            if on_run is not None:
                on_run(run, g, groups, len(found.runs))
    notes = list(found.notes)
    if mlflow_experiments and not any(t.source == "mlflow" for t in tasks):
        notes.append(f"no FAILED or KILLED runs in MLflow experiment(s) {', '.join(mlflow_experiments)}" + (" since then" if since else ""))
    if wandb_projects and not any(t.source == "wandb" for t in tasks):
        notes.append(f"no {' or '.join(wandb_states)} runs in W&B project(s) {', '.join(wandb_projects)}" + (" since then" if since else ""))
    complete = not found.capped and not found.listing_cut
    if found.capped:
        notes.append(f"stopped at {max_runs} runs (the run cap): narrow the targets or raise the cap")
    done = len(groups.runs)
    if done < len(found.runs) and deadline_s is not None:
        complete = False
        notes.append(f"the deadline of {deadline_s:g} s passed after {done} of {len(found.runs)} runs: the rest were not diagnosed")
    report = TriageReport(
        tool=ToolInfo(version=__version__), created_at=datetime.now(UTC), targets=list(targets) + [f"mlflow-experiment:{e}" for e in mlflow_experiments] + [f"wandb:{p}" for p in wandb_projects], since=since,
        backend=backend, workers=workers, elapsed_s=round(time.monotonic() - t0, 3),
        runs_total=len(found.runs), attempts_total=len(tasks), counts=groups.counts(), groups=groups.ordered(),
        runs=sorted(groups.runs, key=lambda r: r.name) if keep_runs else [], complete=complete, notes=notes,
    )
    return report, groups
