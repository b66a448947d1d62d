"""Recent error events from Cloud Logging for a pipeline job, its tasks, or a custom job.

A task's own traceback usually lands in Cloud Logging (its custom job's container log), not in
the pipeline's error field; so the collector reads entries at severity >= ERROR, newest first,
bounded in count and size, over the JSON API of google-cloud-logging (read-only: entries.list).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import Field

from ml_skills.collectors import gcp
from ml_skills.models import Model
from ml_skills.safety.redact import redact

MAX_EVENTS = 50
MAX_TEXT = 4000
ACCESS = "roles/logging.viewer on the project"


class LogEvent(Model):
    """One log entry, redacted and size-capped."""

    time: datetime | None = None
    severity: str
    where: str = Field(description="The task, custom job or log the entry came from.")
    text: str


def pipeline_filter(job_id: str, custom_job_ids: list[str], since: datetime | None) -> str:
    """Entries of the pipeline (its events log, by pipeline_job_id) and of its tasks' custom jobs."""
    ors = [f'labels.pipeline_job_id="{job_id}"', f'resource.labels.pipeline_job_id="{job_id}"']
    ors += [f'resource.labels.job_id="{j}"' for j in custom_job_ids]
    return _with_time(f"severity>=ERROR AND ({' OR '.join(ors)})", since)


def custom_job_filter(job_id: str, since: datetime | None) -> str:
    return _with_time(f'resource.type="ml_job" AND resource.labels.job_id="{job_id}" AND severity>=ERROR', since)


def _with_time(flt: str, since: datetime | None) -> str:
    # Always bound by time: without it the client silently narrows the query to the last 24 hours.
    if since is not None:
        return f'{flt} AND timestamp>="{since.strftime("%Y-%m-%dT%H:%M:%SZ")}"'
    return flt


def error_events(project: str, flt: str, deadline: gcp.Deadline, limit: int = MAX_EVENTS) -> list[LogEvent]:
    """The newest `limit` entries matching the filter, returned oldest first."""
    api_endpoint = gcp.endpoint(gcp.LOGGING_ENV, "https://logging.googleapis.com")

    from google.cloud import logging as gl  # imported before the timed call: a cold import is not the server's slowness

    def fetch(timeout: float) -> list[Any]:
        client = gl.Client(project=project, credentials=_credentials(api_endpoint), _http=_session(api_endpoint, timeout),
                           _use_grpc=False, client_options={"api_endpoint": api_endpoint})
        it = client.list_entries(resource_names=[f"projects/{project}"], filter_=flt, order_by=gl.DESCENDING,
                                 max_results=limit, page_size=limit)
        return list(it)

    entries = gcp.call(fetch, f"Cloud Logging entries.list in project {project}", deadline, access=ACCESS,
                       not_found=f"Cloud Logging has no project {project}: check --project")
    try:
        events = [_event(e) for e in entries]
    except (AttributeError, TypeError, ValueError, RecursionError) as e:  # RecursionError: json.dumps of a deep payload
        from ml_skills.errors import SourceUnavailable

        raise SourceUnavailable(f"Cloud Logging entries.list in project {project}: malformed entry ({type(e).__name__})") from e
    return sorted(events, key=lambda ev: ev.time.timestamp() if ev.time else 0.0)


def _credentials(api_endpoint: str) -> Any:
    creds = gcp.credentials(api_endpoint)
    if creds is None:
        import google.auth

        creds, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/logging.read"])
    return creds


def _session(api_endpoint: str, timeout: float) -> Any:
    """An authorized HTTP session whose every request is bounded by the call's timeout."""
    from google.auth.transport.requests import AuthorizedSession

    bound = timeout

    class Bounded(AuthorizedSession):
        def request(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            kwargs["timeout"] = bound
            return super().request(*args, **kwargs)

    return Bounded(_credentials(api_endpoint))


def _event(entry: Any) -> LogEvent:
    payload = entry.payload
    if isinstance(payload, dict):
        text = payload.get("message") or payload.get("msg") or redact(json.dumps(payload, default=str))[:MAX_TEXT]  # redacted, then cut
    else:
        text = "" if payload is None else str(payload)
    labels = dict(entry.labels or {})
    res = entry.resource.labels if entry.resource is not None else {}
    where = labels.get("task_name") or (f"custom job {res['job_id']}" if res.get("job_id") else "") or (entry.log_name or "").rsplit("/", 1)[-1]
    return LogEvent(time=entry.timestamp, severity=str(entry.severity or "DEFAULT"), where=redact(str(where)),
                    text=redact(str(text)[:MAX_TEXT]))
