"""Vertex AI pipeline jobs and custom jobs: state, task breakdown, error, blast radius, error logs.

A failed pipeline's own error is a summary ("The DAG failed because some tasks failed", code 9
whatever happened); the cause is the first failing task's error and its container log. So the
collector reads the job (aiplatform_v1, REST), finds the first failing task and the last one
that succeeded, counts the tasks that were never triggered because of it, reads the error events
of the pipeline and its tasks from Cloud Logging, and turns the error codes into signals with
their usual meaning on Vertex AI. Read-only: it only calls Get* and entries.list.
"""

from __future__ import annotations

import re
import shlex
import time
from datetime import datetime
from typing import Any

from ml_skills.collectors import cloud_logging, gcp
from ml_skills.errors import InputError, SourceError
from ml_skills.models import (
    Anomaly,
    AnomalyKind,
    CollectRequest,
    EvidenceStatus,
    FailureClass,
    Model,
    Progress,
    RawEvidence,
    Severity,
    SourceEvidence,
    wait,
)
from ml_skills.safety.redact import redact

ACCESS = "roles/aiplatform.viewer on the project"
PIPELINE_TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "PAUSED"}
JOB_TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED"}
MAX_MSG = 600
MAX_TASKS = 200  # tasks listed in details, and failed tasks quoted in lines and the log filter; the rest are counted
MAX_NAME = 200  # a task's name as shown; a task's error message is kept up to MAX_TEXT
MAX_TEXT = 4000
_NAME = re.compile(r"^projects/([^/\s]+)/locations/([^/\s]+)/(pipelineJobs|customJobs)/([^/\s]+)$")
_PIPELINE_ID = re.compile(r"^[a-z][a-z0-9\-]{0,127}$")
_CUSTOM_ID = re.compile(r"^\d{1,30}$")
_SERVICE_ACCOUNT = re.compile(r"^[a-z0-9][a-z0-9._+-]{0,99}@[a-z0-9][a-z0-9.-]{0,199}$")  # goes into a gcloud --filter: its shape only
_PROJECT = re.compile(r"^[a-z0-9][a-z0-9\-.:]{0,99}$")
_REGION = re.compile(r"^[a-z][a-z0-9\-]{1,40}$")
_DAG_SUMMARY = re.compile(r"^The DAG failed because some tasks failed")
_PERMISSION = re.compile(r"PERMISSION_DENIED|\b403\b|does not have [\w.\[\], `]{1,200} (access|IAM permission)|Permission '[\w.]+' denied")
_QUOTA = re.compile(r"(?i)quota|RESOURCE_EXHAUSTED")
_QUOTA_METRIC = re.compile(r"(aiplatform\.googleapis\.com/\w+|Quota '\w+')")
CODES = {0: "OK", 1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND", 6: "ALREADY_EXISTS",
         7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 10: "ABORTED", 11: "OUT_OF_RANGE",
         12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE", 15: "DATA_LOSS", 16: "UNAUTHENTICATED"}


class Target(Model):
    """What the user asked for, validated: a pipeline job or a custom job, by resource name."""

    kind: str  # pipeline or custom
    project: str
    region: str
    job_id: str

    @property
    def name(self) -> str:
        coll = "pipelineJobs" if self.kind == "pipeline" else "customJobs"
        return f"projects/{self.project}/locations/{self.region}/{coll}/{self.job_id}"


class Task(Model):
    task_id: int
    parent: int
    name: str
    state: str
    start: datetime | None = None
    end: datetime | None = None
    code: int = 0
    message: str = ""
    custom_job: str = ""


def resolve(job: str, project: str | None, region: str | None) -> Target:
    """Accept a pipeline job id, a custom job id (digits) or either's full resource name."""
    job = job.strip()
    m = _NAME.fullmatch(job)
    if m:
        project, region = project or m.group(1), region or m.group(2)
        if (project, region) != (m.group(1), m.group(2)):
            raise InputError(f"--project/--region ({project}/{region}) disagree with the resource name {job}: give one or the other")
        kind, job_id = ("pipeline" if m.group(3) == "pipelineJobs" else "custom"), m.group(4)
    else:
        kind, job_id = ("custom" if _CUSTOM_ID.fullmatch(job) else "pipeline"), job
    if not project or not region:
        raise InputError("--vertex-pipeline needs --project and --region (or a full name: projects/P/locations/R/pipelineJobs/ID)")
    if not _PROJECT.fullmatch(project):
        raise InputError(f"--project {project!r} is not a GCP project id or number")
    if not _REGION.fullmatch(region):
        raise InputError(f"--region {region!r} is not a GCP region (like us-central1)")
    if not (_CUSTOM_ID if kind == "custom" else _PIPELINE_ID).fullmatch(job_id):
        raise InputError(f"{job_id!r} is not a Vertex AI {'custom job id (digits)' if kind == 'custom' else 'pipeline job id'}")
    return Target(kind=kind, project=project, region=region, job_id=job_id)


def collect(req: CollectRequest, progress: Progress | None = None) -> RawEvidence:
    """The COLLECTORS entry: one pass with --once, else poll every --interval s until a terminal state.

    Between polls `progress` (when the CLI runs in a terminal) counts down to the next check.
    """
    target = resolve(req.vertex_pipeline or "", req.project, req.region)
    terminal = PIPELINE_TERMINAL if target.kind == "pipeline" else JOB_TERMINAL
    while True:
        job, job_problem = read_job(target)
        state = _state(job)
        if req.once or job is None or state in terminal:
            break
        wait(req.interval, f"{target.job_id}: {state}; next check (Ctrl-C to stop)", progress, time.sleep)
    events, log_problem = read_events(target, job)
    return RawEvidence(source=build(target, job, job_problem, events, log_problem))


def describe(job: str, project: str | None = None, region: str | None = None) -> SourceEvidence:
    """One read-only pass over a pipeline or custom job and its error logs (what an evidence tool returns)."""
    target = resolve(job, project, region)
    found, problem = read_job(target)
    events, log_problem = read_events(target, found)
    return build(target, found, problem, events, log_problem)


def read_job(target: Target) -> tuple[Any, str | None]:
    """The job resource, or None and why it could not be read (a 404 is bad input: it raises)."""
    api_endpoint = gcp.endpoint(gcp.VERTEX_ENV, f"{target.region}-aiplatform.googleapis.com")
    what = f"Vertex AI {'GetPipelineJob' if target.kind == 'pipeline' else 'GetCustomJob'} for {target.name}"

    from google.cloud import aiplatform_v1  # imported before the timed call: a cold import is not the server's slowness

    def get(timeout: float) -> Any:
        opts = {"api_endpoint": api_endpoint}
        creds = gcp.credentials(api_endpoint)
        if target.kind == "pipeline":
            pc = aiplatform_v1.PipelineServiceClient(credentials=creds, transport="rest", client_options=opts)
            return pc.get_pipeline_job(name=target.name, timeout=timeout, retry=None)
        jc = aiplatform_v1.JobServiceClient(credentials=creds, transport="rest", client_options=opts)
        return jc.get_custom_job(name=target.name, timeout=timeout, retry=None)

    try:
        return gcp.call(get, what, gcp.Deadline(), access=ACCESS,
                        not_found=f"no {'pipeline job' if target.kind == 'pipeline' else 'custom job'} {target.name}: "
                                  f"check the id, --project and --region"), None
    except SourceError as e:
        return None, redact(str(e))


def read_events(target: Target, job: Any) -> tuple[list[cloud_logging.LogEvent] | None, str | None]:
    since = getattr(job, "create_time", None) if job is not None else None
    if target.kind == "pipeline":
        jobs = [t.custom_job for t in tasks_of(job) if t.state == "FAILED" and t.custom_job][:MAX_TASKS // 10] if job is not None else []
        flt = cloud_logging.pipeline_filter(target.job_id, jobs, since)
    else:
        flt = cloud_logging.custom_job_filter(target.job_id, since)
    try:
        return cloud_logging.error_events(target.project, flt, gcp.Deadline()), None
    except (SourceError, InputError) as e:
        return None, redact(str(e))


def _enum(value: Any, prefix: str) -> str:
    name = getattr(value, "name", None) or str(value)
    return name.removeprefix(prefix)


def _state(job: Any) -> str | None:
    if job is None:
        return None
    return _enum(job.state, "PIPELINE_STATE_" if hasattr(job, "job_detail") else "JOB_STATE_")


def tasks_of(job: Any) -> list[Task]:
    """The executor tasks of a pipeline: DAG tasks (the root and any sub-DAG with children) left out."""
    out = []
    for t in job.job_detail.task_details:
        ex = t.executor_detail
        cj = ex.container_detail.main_job or (ex.custom_job_detail.job if "custom_job_detail" in ex else "")
        cj_id = cj.rsplit("/", 1)[-1] if cj else ""
        # The custom job's id goes into a Cloud Logging filter and a gcloud command: only an id of its shape (digits).
        # A task's `mainJob` is the job's own data: `1" OR severity>=DEFAULT OR "x` widened the filter to every entry
        # of the project (eighth round).
        out.append(Task(task_id=t.task_id, parent=t.parent_task_id, name=t.task_name[:MAX_NAME], state=_enum(t.state, ""),
                        start=t.start_time or None, end=t.end_time or None, code=t.error.code, message=redact(t.error.message)[:MAX_TEXT],
                        custom_job=cj_id if _CUSTOM_ID.fullmatch(cj_id) else ""))
    parents = {t.parent for t in out}
    leaves = [t for t in out if t.task_id not in parents]
    return leaves or out


def _code(code: int) -> str:
    return CODES.get(code, f"code {code}")


def _err(code: int, message: str) -> str:
    """A job's or task's error, redacted before anything cuts it: before the fifteenth round a message quoting
    `https://u:PW@host` was cut (here, then to 300 for the report) between the password and its `@host`, and the password
    was in the CLI's report and JSON."""
    return f"{_code(code)} (code {code}): {' '.join(redact(message).split())[:MAX_MSG]}"


def heuristics(code: int, message: str, where: str, service_account: str, source: str) -> list[Anomaly]:
    """What an error code usually means on Vertex AI, as a signal for the classifier."""
    def sig(cls: FailureClass, detail: str) -> Anomaly:
        return Anomaly(kind=AnomalyKind.SOURCE_SIGNAL, failure_class=cls, severity=Severity.CRITICAL, source=source,
                       detail=redact(f"{where} {detail}: {_err(code, message)[:300]}"))

    if code == 7 or _PERMISSION.search(message):
        sa = f"service account {service_account}" if service_account else "job's service account"
        return [sig(FailureClass.CLOUD_PERMISSIONS_QUOTA,
                    f"was denied permission: the {sa} lacks an IAM role on the resource it names; the model code is not at fault")]
    if code == 8 or _QUOTA.search(message):
        m = _QUOTA_METRIC.search(message)
        metric = f" ({m.group(1)})" if m else ""
        return [sig(FailureClass.CLOUD_PERMISSIONS_QUOTA,
                    f"hit RESOURCE_EXHAUSTED / quota{metric} while provisioning: a quota or region problem (request quota or "
                    f"use another region or machine type), not the model code")]
    if code == 16:
        return [sig(FailureClass.CLOUD_PERMISSIONS_QUOTA, "had no valid credentials (UNAUTHENTICATED)")]
    if code == 9 and not _DAG_SUMMARY.search(message):
        return [sig(FailureClass.PIPELINE_ORCHESTRATION,
                    "failed a precondition (FAILED_PRECONDITION): usually a missing input data or artifact path, or a resource "
                    "in the wrong state; check every gs:// path it reads")]
    return []


def build(target: Target, job: Any, job_problem: str | None, events: list[cloud_logging.LogEvent] | None,
          log_problem: str | None) -> SourceEvidence:
    """SourceEvidence from whatever arrived: the job, its error logs, or only the note of what is missing."""
    kind = "vertex-pipeline" if target.kind == "pipeline" else "vertex-custom-job"
    src = SourceEvidence(kind=kind, name=target.name, status=EvidenceStatus.OK, state=None)
    label = "Pipeline" if target.kind == "pipeline" else "Custom job"
    src.report_lines.append(f"{label}: {target.name}")
    if job is None:
        src.report_lines.append(f"{label} state: unknown (not read)")
        src.missing.append(f"the job itself: {job_problem}")
    elif target.kind == "pipeline":
        _pipeline(src, job)
    else:
        _custom_job(src, job)
    if events is None:
        src.missing.append(f"Cloud Logging error events: {log_problem}")
        src.report_lines.append("Cloud Logging: not read (see missing)")
    else:
        src.facts["log_error_events"] = str(len(events))
        src.report_lines.append(f"Cloud Logging: {len(events)} error event(s) at severity >= ERROR")
        task_of = {f"custom job {t.custom_job}": f"task {t.name}, custom job {t.custom_job}"
                   for t in (tasks_of(job) if job is not None and target.kind == "pipeline" else []) if t.custom_job}
        for ev in events:
            first, *rest = ev.text.splitlines() or [""]
            when = f"{ev.time:%Y-%m-%dT%H:%M:%SZ} " if ev.time else ""
            src.lines.append(f"{when}{ev.severity} [{task_of.get(ev.where, ev.where)}] {first}")
            src.lines.extend(rest)
    src.details["next_commands"] = next_commands(target, job, src)
    for m in src.missing:
        src.report_lines.append(f"Missing: {m}")
    if job is None and events is None:
        src.status = EvidenceStatus.ERROR
    elif src.missing:
        src.status = EvidenceStatus.PARTIAL
    src.lines = [redact(x) for x in src.lines]
    return src


def _pipeline(src: SourceEvidence, job: Any) -> None:
    state = _state(job) or "UNKNOWN"
    src.state = state
    tasks = tasks_of(job)
    by: dict[str, list[Task]] = {}
    for t in tasks:
        by.setdefault(t.state, []).append(t)
    failed = sorted(by.get("FAILED", []), key=lambda t: (t.end.timestamp() if t.end else float("inf"), t.task_id))
    succeeded = sorted(by.get("SUCCEEDED", []), key=lambda t: (t.end.timestamp() if t.end else 0.0, t.task_id))
    not_triggered = by.get("NOT_TRIGGERED", [])
    sa = job.service_account or ""
    src.report_lines.append(f"Pipeline state: {state}")
    if job.error.code or job.error.message:
        src.report_lines.append(f"Pipeline error: {_err(job.error.code, job.error.message)[:300]}")
    counts = [f"{len(by.get(s, []))} {w}" for s, w in (("SUCCEEDED", "succeeded"), ("FAILED", "failed"), ("RUNNING", "running"),
                                                       ("PENDING", "pending"), ("NOT_TRIGGERED", "not triggered"))]
    counts += [f"{len(v)} {k.lower().replace('_', ' ')}" for k, v in by.items() if k not in ("SUCCEEDED", "FAILED", "RUNNING", "PENDING", "NOT_TRIGGERED")]
    src.report_lines.append("Tasks: " + ", ".join(counts))
    more = f" (and {len(failed) - 20} more)" if len(failed) > 20 else ""
    src.report_lines.append("Failed tasks: " + (", ".join(t.name for t in failed[:20]) or "none") + more)
    first = failed[0] if failed else None
    if first is not None:
        radius = f"first failing task {first.name} ({_code(first.code)})"
        radius += f"; last successful task {succeeded[-1].name}" if succeeded else "; no task succeeded before it"
        if not_triggered:
            radius += f"; {len(not_triggered)} task(s) not triggered because of it: {', '.join(t.name for t in not_triggered[:8])}"
        src.report_lines.append(f"Blast radius: {radius}")
        src.facts["first_failing_task"] = first.name
    src.facts.update({"state": state, "tasks": ", ".join(counts)})
    if succeeded:
        src.facts["last_successful_task"] = succeeded[-1].name
    if sa:
        src.facts["service_account"] = sa
    # A pipeline of 100,000 tasks made a 17 MB answer (eighth round): the failed tasks first, then the rest, up to MAX_TASKS.
    listed = [*failed, *(t for t in tasks if t.state != "FAILED")][:MAX_TASKS]
    if len(tasks) > MAX_TASKS:
        src.missing.append(f"{len(tasks)} tasks: only {MAX_TASKS} are listed in details (the failed ones first)")
    src.details.update({"tasks": [t.model_dump(mode="json") for t in listed], "tasks_total": len(tasks),
                        "error": {"code": job.error.code, "message": redact(job.error.message)[:MAX_TEXT]}})
    # The first failing task's own error first: the classifier gives the first cause a lead.
    for t in failed[:MAX_TASKS]:
        if t.code or t.message:
            src.lines.append(f"Task {t.name} failed: {_err(t.code, t.message)}")
            if t is first:
                src.signals += heuristics(t.code, t.message, f"task {t.name}", sa, f"{src.kind}:{src.name}")
    own = first is not None and bool(first.code or first.message)
    if (job.error.code or job.error.message) and not (own and _DAG_SUMMARY.search(job.error.message)):
        # the DAG summary only repeats that a task failed: scanned only when no task says why
        src.lines.append(f"Pipeline job {src.name} ended with state {state}: {_err(job.error.code, job.error.message)}")
        if not own:
            src.signals += heuristics(job.error.code, job.error.message, "the pipeline", sa, f"{src.kind}:{src.name}")
    if first is not None and len(not_triggered) >= 2:
        src.signals.append(Anomaly(kind=AnomalyKind.SOURCE_SIGNAL, failure_class=FailureClass.PIPELINE_ORCHESTRATION,
                                   severity=Severity.MINOR, source=f"{src.kind}:{src.name}",
                                   detail=f"{len(not_triggered)} tasks NOT_TRIGGERED ({', '.join(t.name for t in not_triggered[:8])}) "
                                          f"are consequences of one upstream failure: fix task {first.name} first"))


def _custom_job(src: SourceEvidence, job: Any) -> None:
    state = _state(job) or "UNKNOWN"
    src.state = state
    src.report_lines.append(f"Job state: {state}")
    pools = []
    for p in job.job_spec.worker_pool_specs:
        ms = p.machine_spec
        acc = f" with {ms.accelerator_count} x {_enum(ms.accelerator_type, '')}" if ms.accelerator_count else ""
        pools.append(f"{p.replica_count or 1} x {ms.machine_type}{acc}")
    if pools:
        src.report_lines.append("Machines: " + "; ".join(pools))
        src.facts["machines"] = "; ".join(pools)
    src.facts["state"] = state
    sa = job.job_spec.service_account or ""
    if sa:
        src.facts["service_account"] = sa
    if job.error.code or job.error.message:
        src.report_lines.append(f"Job error: {_err(job.error.code, job.error.message)[:300]}")
        src.lines.append(f"Custom job {src.name} ended with state JOB_STATE_{state}: {_err(job.error.code, job.error.message)}")
        src.signals += heuristics(job.error.code, job.error.message, "the custom job", sa, f"{src.kind}:{src.name}")
    src.details["error"] = {"code": job.error.code, "message": redact(job.error.message)}


def next_commands(target: Target, job: Any, src: SourceEvidence) -> list[str]:
    """Read-only gcloud commands for a person to look further: the failed task's log, the paths, the roles."""
    q = shlex.quote
    cmds = []
    failed = [t for t in tasks_of(job) if t.state == "FAILED"] if job is not None and target.kind == "pipeline" else []
    job_id = next((t.custom_job for t in failed if t.custom_job), "") or (target.job_id if target.kind == "custom" else "")
    if job_id:
        flt = f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"'
        cmds.append(f"gcloud logging read {q(flt)} --project={q(target.project)} --limit=200 --order=asc")
    elif target.kind == "pipeline":
        flt = f'labels.pipeline_job_id="{target.job_id}" OR resource.labels.pipeline_job_id="{target.job_id}"'
        cmds.append(f"gcloud logging read {q(flt)} --project={q(target.project)} --limit=200 --order=asc")
    text = " ".join(src.lines[:20])
    uri = re.search(r"gs://[\w.\-]+(?:/[\w.\-=/]*)?", text)
    if uri:
        cmds.append(f"gcloud storage ls {q(uri.group(0).rstrip('/.'))}")
    sa = src.facts.get("service_account")
    if sa and _SERVICE_ACCOUNT.fullmatch(sa) and any(a.failure_class is FailureClass.CLOUD_PERMISSIONS_QUOTA and "permission" in a.detail for a in src.signals):
        cmds.append(f"gcloud projects get-iam-policy {q(target.project)} --flatten={q('bindings[].members')} "
                    f"--filter={q('bindings.members:serviceAccount:' + sa)} --format='table(bindings.role)'")
    return cmds
