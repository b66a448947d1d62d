"""--mlflow-experiment: the failed and killed runs of an MLflow experiment, as runs of the grid.

Listed with the mlflow client's `search_runs` (imported here only), one search per state, newest
first, bounded by the run cap; `--since` keeps runs that started since then. Each run is then
diagnosed by the engine's own MLflow collector in a worker (MLFLOW_TRACKING_URI from the
environment, which the workers inherit), exactly as `check-failed-run --mlflow RUN` does.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from ml_skills.collectors.http_api import Deadline
from ml_skills.collectors.tracker import deadline_s
from ml_skills.errors import InputError, SourceUnavailable
from ml_skills.grid.models import AttemptTask
from ml_skills.grid.wandb_runs import listing_deadline
from ml_skills.safety.redact import redact, redact_cut

STATES = ("FAILED", "KILLED")
PAGE = 1000


def _when(ms: object) -> datetime | None:
    """A run's end time, or None when the server's value is no time at all (2**62 ms is year 146,140,482)."""
    try:
        return datetime.fromtimestamp(float(ms) / 1000, UTC) if ms else None  # type: ignore[arg-type]
    except (OverflowError, ValueError, OSError, TypeError):
        return None


def failed_runs(experiment: str, since: datetime | None = None, max_runs: int | None = None) -> list[AttemptTask]:
    """One task per failed or killed run (attempt from a `-retryN` style run name, else 0)."""
    from ml_skills.collectors.attempts import split_name

    uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if not uri:
        raise InputError("--mlflow-experiment needs MLFLOW_TRACKING_URI: the tracking server URL (http://host:5000) or a local store")
    if not experiment.strip() or len(experiment) > 200:
        raise InputError("--mlflow-experiment expects an experiment id (or name)")
    from ml_skills.collectors.mlflow import quiet

    quiet()
    try:
        from mlflow.exceptions import MlflowException
    except ImportError:
        raise InputError("--mlflow-experiment needs the mlflow client: pip install 'ml-skills[mlflow]'") from None
    from ml_skills.collectors.mlflow import read_only_client

    try:
        client = read_only_client(uri)  # never creates, migrates or writes to the store (thirty-third round)
        exp_id = experiment if experiment.isdigit() else None
        if exp_id is None:
            exp = client.get_experiment_by_name(experiment)
            if exp is None:
                raise InputError(f"no MLflow experiment named {experiment!r} on {redact(uri)}")
            exp_id = exp.experiment_id
        tasks: list[AttemptTask] = []
        deadline = Deadline(deadline_s())
        for state in STATES:
            flt = f"attributes.status = '{state}'"
            if since is not None:
                flt += f" and attributes.start_time >= {int(since.timestamp() * 1000)}"
            token = None
            while max_runs is None or len(tasks) < max_runs:
                page = client.search_runs([exp_id], filter_string=flt, max_results=PAGE, order_by=["attributes.start_time DESC"], page_token=token)
                for r in page:
                    name = redact_cut(r.data.tags.get("mlflow.runName") or r.info.run_id, 200)
                    key, n = split_name(name)
                    end = r.info.end_time or r.info.start_time
                    tasks.append(AttemptTask(run=key, attempt=n, path=r.info.run_id, source="mlflow", seen=_when(end)))
                token = page.token
                if not token:
                    break
                listing_deadline(deadline, f"MLflow experiment {experiment}", len(tasks))
        return tasks[:max_runs] if max_runs else tasks
    except MlflowException as e:
        raise SourceUnavailable(f"MLflow at {redact(uri)} refused the search of experiment {experiment}: {redact(str(e))[:300]}") from None
