"""--ray ADDRESS: the same per-attempt diagnosis as Ray tasks on an existing cluster.

Ray is imported only here. The cluster's workers must be able to import ml_skills (installed on
every node, as the training code is). Tasks travel as plain dicts and come back as the same
small records the local pool returns, at most two per cluster CPU in flight, so the driver's
memory follows the cluster's size, not the number of runs; groups are built by the same code.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from ml_skills.errors import InputError, SourceUnavailable
from ml_skills.grid.models import AttemptRecord, AttemptTask, Outcome


def diagnose_json(task: dict[str, Any]) -> dict[str, Any]:
    """The Ray task body: the local pool's worker function, on plain values."""
    from ml_skills.grid.record import diagnose_attempt

    return diagnose_attempt(AttemptTask.model_validate(task)).model_dump(mode="json")


def connect(address: str) -> int:
    """Join the cluster at `address`; return its CPU count. One line when it cannot be reached."""
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs Ray on this machine: pip install ray (the cluster's nodes need ml-skills too)") from None
    _probe(address)
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, ignore_reinit_error=True, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise SourceUnavailable(f"cannot join the Ray cluster at {address}: {str(e).splitlines()[0][:300]} "
                                "(start one with `ray start --head`, or check the address)") from None
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _probe(address: str, timeout: float = 10.0) -> None:
    """A host:port with nothing listening fails in seconds here; ray.init would retry it for minutes."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise SourceUnavailable(f"cannot join the Ray cluster at {address}: nothing answers there ({e.strerror or e}); "
                                "start one with `ray start --head`, or check the address") from None


def run(tasks: list[AttemptTask], cpus: int, deadline: float | None) -> Iterator[AttemptRecord]:
    """Records in the order they finish; at the deadline nothing more is submitted and the rest is cancelled."""
    import ray

    remote = ray.remote(num_cpus=1, max_retries=1)(diagnose_json)
    todo = iter(tasks)
    pending: dict[Any, AttemptTask] = {}
    try:
        while True:
            while len(pending) < 2 * cpus and (deadline is None or time.monotonic() < deadline):
                nxt = next(todo, None)
                if nxt is None:
                    break
                pending[remote.remote(nxt.model_dump(mode="json"))] = nxt
            if not pending:
                return
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            if not ready and deadline is not None and time.monotonic() >= deadline:
                return
            for ref in ready:
                task = pending.pop(ref)
                try:
                    yield AttemptRecord.model_validate(ray.get(ref))
                except Exception as e:  # noqa: BLE001 - a task that died on the cluster is that run's row, not the grid's end
                    yield AttemptRecord(run=task.run, attempt=task.attempt, path=task.path, outcome=Outcome.UNREADABLE,
                                        error=f"the Ray task failed: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        ray.shutdown()
