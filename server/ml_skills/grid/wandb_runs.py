"""--wandb ENTITY/PROJECT: the failed, crashed and killed runs of a W&B project, as runs of the grid.

Listed with the real wandb client's `Api().runs` (imported here only), filtered by state on the
server, newest first, bounded by the run cap; `--since` keeps runs created since then. Each run is
then diagnosed by the engine's own W&B collector in a worker (WANDB_API_KEY and WANDB_BASE_URL
from the environment, which the workers inherit), exactly as `check-failed-run --wandb
ENTITY/PROJECT/RUN_ID` does. A run is named by its display name; runs that share one (a
resubmission of the same cell) or carry `-retryN` in it are attempts of one run, oldest first.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from typing import Any

from ml_skills.collectors.attempts import split_name
from ml_skills.collectors.http_api import Deadline
from ml_skills.collectors.tracker import deadline_s
from ml_skills.errors import InputError, MLSkillsError, SourceTimeout, TargetNotFound
from ml_skills.grid.models import AttemptTask
from ml_skills.safety.redact import redact_cut

FAILED_STATES = ("failed", "crashed", "killed")
STATES = ("failed", "crashed", "killed", "preempted", "finished", "running")
PAGE = 100
_PROJECT = re.compile(r"^(?P<entity>[\w.-]{1,128})/(?P<project>[\w.-]{1,128})$")


def parse_states(text: str | None) -> tuple[str, ...]:
    """'failed,crashed' -> ('failed', 'crashed'); 'all' -> every state; None -> the failed ones."""
    if not text:
        return FAILED_STATES
    if text.strip().lower() == "all":
        return STATES
    states = tuple(dict.fromkeys(s.strip().lower() for s in text.split(",") if s.strip()))
    bad = [s for s in states if s not in STATES]
    if bad or not states:
        raise InputError(f"--wandb-states {text!r}: give states among {', '.join(STATES)} (comma-separated), or all")
    return states


def project_runs(project: str, since: datetime | None = None, max_runs: int | None = None,
                 states: tuple[str, ...] = FAILED_STATES) -> list[AttemptTask]:
    """One task per run of the project in one of `states`, newest first, at most one past `max_runs` (discovery caps)."""
    m = _PROJECT.match(project.strip())
    if m is None:
        raise InputError(f"--wandb expects ENTITY/PROJECT (as in the project's URL); {redact_cut(project, 120)!r} is not")
    try:
        import wandb
    except ImportError:
        raise InputError("--wandb ENTITY/PROJECT needs the wandb package: pip install 'ml-skills[wandb]'") from None
    import logging

    from ml_skills.collectors.wandb import _error, client_settings

    logging.getLogger("wandb").setLevel(logging.CRITICAL)
    client_settings()
    flt: dict[str, Any] = {"state": {"$in": list(states)}}
    if since is not None:
        flt = {"$and": [flt, {"createdAt": {"$gte": since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}}]}
    where = f"W&B project {m['entity']}/{m['project']}"
    rows: list[tuple[str, str, datetime | None, datetime | None]] = []
    deadline = Deadline(deadline_s())  # a server that pages forever was listed with no end (twentieth round)
    try:
        key = os.environ.get("WANDB_API_KEY")
        per_call = max(1, int(min(30.0, deadline.left())))
        api = wandb.Api(api_key=key, timeout=per_call) if key else wandb.Api(timeout=per_call)
        limit = max_runs + 1 if max_runs else None  # one past the cap, so the triage can say it stopped there
        for r in api.runs(f"{m['entity']}/{m['project']}", filters=flt, order="-created_at", per_page=min(PAGE, limit or PAGE)):
            attrs = getattr(r, "_attrs", {}) or {}
            rows.append((str(r.id), redact_cut(str(r.display_name or r.id), 200), _time(attrs.get("createdAt")), _time(attrs.get("heartbeatAt"))))
            if limit is not None and len(rows) >= limit:
                break
            listing_deadline(deadline, where, len(rows))
    except MLSkillsError:
        raise
    except Exception as e:  # noqa: BLE001 - the wandb client raises many types; _error names them in one line
        err = _error(e, f"the runs of {where}")
        if isinstance(err, TargetNotFound) or "could not find project" in str(e).lower():  # the client's answer to a null project
            raise TargetNotFound(f"no {where}: check ENTITY/PROJECT (as in the project's URL) and that WANDB_API_KEY may read it") from None
        raise err from None
    return _tasks(m["entity"], m["project"], rows)


def listing_deadline(deadline: Deadline, where: str, listed: int) -> None:
    """One line, at the tracker's deadline, for a listing of a project's or experiment's runs that has not ended."""
    if deadline.left() <= 0:
        raise SourceTimeout(f"{where}: still listing runs at the {deadline.seconds:g}s deadline ({listed} listed, the server "
                            "kept sending more): narrow the triage with --since or --max-runs, or raise ML_SKILLS_TRACKER_TIMEOUT")


def _tasks(entity: str, project: str, rows: list[tuple[str, str, datetime | None, datetime | None]]) -> list[AttemptTask]:
    """Attempts numbered from the name (-retryN), else by creation order among runs of the same name."""
    by_key: dict[str, list[tuple[int, datetime | None, str, datetime | None]]] = {}
    for rid, name, created, beat in rows:
        key, n = split_name(name)
        by_key.setdefault(key, []).append((n, created, rid, beat or created))
    tasks: list[AttemptTask] = []
    for key, runs in by_key.items():
        runs.sort(key=lambda x: (x[0], x[1] or datetime.min.replace(tzinfo=UTC)))
        renumber = len({n for n, *_ in runs}) < len(runs)  # two launches of one name: their order is their creation
        for i, (n, _, rid, seen) in enumerate(runs):
            tasks.append(AttemptTask(run=key, attempt=i if renumber else n, path=f"{entity}/{project}/{rid}", source="wandb", seen=seen))
    return tasks


def _time(v: Any) -> datetime | None:
    if not isinstance(v, str) or not v:
        return None
    try:
        t = datetime.fromisoformat(v)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)  # W&B writes UTC without an offset
