"""A loopback fake of the Vertex AI and Cloud Logging REST wire APIs, for the real client libraries.

The real `google-cloud-aiplatform` (aiplatform_v1, transport "rest") and `google-cloud-logging`
(JSON API) clients are pointed at it with anonymous credentials. It answers the paths those
clients really call:

    GET  /v1/projects/P/locations/R/pipelineJobs/ID          PipelineService.GetPipelineJob
    POST /v1/projects/P/locations/R/pipelineJobs/ID:cancel   PipelineService.CancelPipelineJob
    GET  /v1/projects/P/locations/R/customJobs/ID            JobService.GetCustomJob
    POST /v2/entries:list                                    LoggingServiceV2.ListLogEntries

and records every call (method, path, query, JSON body, headers). Faults are queued per route
("pipeline", "custom", "cancel", "logs") and consumed one per request: a status with headers and
body, a delay (a hang past the client's timeout), a malformed body, a TCP reset, or a slow drip (the real answer
sent one byte at a time, each byte well inside the client's per-read timeout).

Payloads use the real field names of PipelineJob, PipelineTaskDetail, CustomJob, google.rpc.Status
and LogEntry (REST JSON, camelCase). The error messages are worded as Vertex AI words them in public
reports, cited next to each scenario.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from tests.fakes.wire import reset, send_body

PROJECT = "ml-proj"
PROJECT_NUMBER = "418029537311"
REGION = "us-central1"
SA = f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com"


@dataclass
class Fault:
    """One faulty answer: a status (with headers and body), a delay first, a raw body, or a drip interval."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    delay: float = 0.0
    drip: float = 0.0
    reset: bool = False  # close the connection with a TCP reset instead of answering


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str]


_ROUTES = [
    ("cancel", "POST", re.compile(r"^/v1/(projects/[^/]+/locations/[^/]+/pipelineJobs/[^/:]+):cancel$")),
    ("pipeline", "GET", re.compile(r"^/v1/(projects/[^/]+/locations/[^/]+/pipelineJobs/[^/:]+)$")),
    ("custom", "GET", re.compile(r"^/v1/(projects/[^/]+/locations/[^/]+/customJobs/[^/:]+)$")),
    ("logs", "POST", re.compile(r"^/v2/(entries:list)$")),
]
_SEVERITY = ["DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY"]


def _int_enums(payload: dict[str, Any] | None, ints: bool) -> dict[str, Any] | None:
    """Encode enum fields as numbers, as the real API does when asked for enum-encoding=int."""
    if payload is None or not ints:
        return payload
    from google.cloud.aiplatform_v1.types import AcceleratorType, JobState, PipelineState, PipelineTaskDetail

    p = json.loads(json.dumps(payload))
    table = PipelineState if p["name"].split("/")[-2] == "pipelineJobs" else JobState
    if isinstance(p.get("state"), str):
        p["state"] = table[p["state"]].value
    for t in p.get("jobDetail", {}).get("taskDetails", []):
        t["state"] = PipelineTaskDetail.State[t["state"]].value
    for pool in p.get("jobSpec", {}).get("workerPoolSpecs", []):
        ms = pool.get("machineSpec", {})
        if "acceleratorType" in ms:
            ms["acceleratorType"] = AcceleratorType[ms["acceleratorType"]].value
    return p


def _status(code: int, message: str, status: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "status": status}}).encode()


class VertexFake:
    """The fake server and its state; use as a context manager (binds 127.0.0.1 on a free port)."""

    def __init__(self) -> None:
        self.pipeline_jobs: dict[str, list[dict[str, Any]]] = {}  # name -> payloads served in turn (last repeats)
        self.custom_jobs: dict[str, dict[str, Any]] = {}
        self.log_entries: list[dict[str, Any]] = []
        self.faults: dict[str, list[Fault]] = {}
        self.calls: list[Call] = []
        self.cancelled: list[str] = []
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ setup

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add_pipeline(self, *payloads: dict[str, Any]) -> str:
        name = payloads[0]["name"]
        self.pipeline_jobs[name] = list(payloads)
        return name

    def add_custom_job(self, payload: dict[str, Any]) -> str:
        self.custom_jobs[payload["name"]] = payload
        return payload["name"]

    def fail(self, route: str, *faults: Fault) -> None:
        self.faults.setdefault(route, []).extend(faults)

    def calls_to(self, route: str) -> list[Call]:
        rx = next(r for n, _, r in _ROUTES if n == route)
        return [c for c in self.calls if rx.match(c.path)]

    def __enter__(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------ serving

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        route, m = next(((n, rx.match(url.path)) for n, meth, rx in _ROUTES if meth == method and rx.match(url.path)), (None, None))
        with self._lock:
            self.calls.append(Call(method, url.path, parse_qs(url.query), body, dict(h.headers.items())))
            fault = self.faults[route].pop(0) if self.faults.get(route) else None
        h.drip = fault.drip if fault is not None else 0.0  # type: ignore[attr-defined]  # this request's drip, read by _send
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            if fault.reset:
                reset(h)
                return None
            if fault.status != 200 or fault.body is not None:
                return self._send(h, fault.status, fault.body or _status(fault.status, "fault", "UNKNOWN"), fault.headers)
        if route is None or m is None:
            return self._send(h, 404, _status(404, f"The requested URL {url.path} was not found on this server.", "NOT_FOUND"))
        name = m.group(1).replace(f"projects/{PROJECT}/", f"projects/{PROJECT_NUMBER}/", 1)
        ints = "enum-encoding=int" in url.query  # what the REST client asks for: enums as numbers
        match route:
            case "pipeline":
                return self._send_json(h, _int_enums(self._next_pipeline(name), ints), f'The PipelineJob "{name}" does not exist.')
            case "custom":
                return self._send_json(h, _int_enums(self.custom_jobs.get(name), ints), f'The CustomJob "{name}" does not exist.')
            case "cancel":
                if name not in self.pipeline_jobs:
                    return self._send(h, 404, _status(404, f'The PipelineJob "{name}" does not exist.', "NOT_FOUND"))
                with self._lock:
                    self.cancelled.append(name)
                return self._send(h, 200, b"{}")
            case "logs":
                return self._send(h, 200, json.dumps(self._entries(body if isinstance(body, dict) else {})).encode())

    def _next_pipeline(self, name: str) -> dict[str, Any] | None:
        payloads = self.pipeline_jobs.get(name)
        if not payloads:
            return None
        with self._lock:
            i = self._served.get(name, 0)
            self._served[name] = i + 1
        return payloads[min(i, len(payloads) - 1)]

    def _entries(self, req: dict[str, Any]) -> dict[str, Any]:
        """A minimal evaluation of the filter: the ids it names, and severity>=X."""
        flt = req.get("filter", "")
        floor = re.search(r"severity\s*>=\s*(\w+)", flt)
        min_sev = _SEVERITY.index(floor.group(1)) if floor and floor.group(1) in _SEVERITY else 0
        out = []
        for e in self.log_entries:
            ids = [*e.get("labels", {}).values(), *e.get("resource", {}).get("labels", {}).values()]
            if not any(f'"{i}"' in flt for i in ids):
                continue
            if _SEVERITY.index(e.get("severity", "DEFAULT")) < min_sev:
                continue
            out.append(e)
        out.sort(key=lambda e: e["timestamp"], reverse="desc" in req.get("orderBy", ""))
        size = int(req.get("pageSize") or 1000)
        return {"entries": out[:size]}

    def _send_json(self, h: BaseHTTPRequestHandler, payload: dict[str, Any] | None, missing: str) -> None:
        if payload is None:
            return self._send(h, 404, _status(404, missing, "NOT_FOUND"))
        self._send(h, 200, json.dumps(payload).encode())

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json; charset=UTF-8")
            h.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            send_body(h, body, getattr(h, "drip", 0.0))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout), as a real client does


# ---------------------------------------------------------------- payloads

T0 = "2026-11-29T16:00:00.000000Z"


def _t(minutes: int) -> str:
    return f"2026-11-29T{16 + minutes // 60:02d}:{minutes % 60:02d}:00.000000Z"


def pipeline_name(job_id: str) -> str:
    return f"projects/{PROJECT_NUMBER}/locations/{REGION}/pipelineJobs/{job_id}"


def custom_job_name(job_id: str) -> str:
    return f"projects/{PROJECT_NUMBER}/locations/{REGION}/customJobs/{job_id}"


def task(task_id: int, name: str, state: str, *, start: int | None = None, end: int | None = None,
         error: tuple[int, str] | None = None, job: str | None = None, parent: int = 1) -> dict[str, Any]:
    """A PipelineTaskDetail as the REST API returns it (int64 ids are JSON strings)."""
    t: dict[str, Any] = {"taskId": str(task_id), "parentTaskId": str(parent), "taskName": name, "state": state,
                         "createTime": _t(start if start is not None else 0)}
    if start is not None:
        t["startTime"] = _t(start)
    if end is not None:
        t["endTime"] = _t(end)
    if error is not None:
        t["error"] = {"code": error[0], "message": error[1]}
    if job is not None:
        t["executorDetail"] = {"containerDetail": {"mainJob": custom_job_name(job)}}
    return t


def pipeline(job_id: str, state: str, tasks: list[dict[str, Any]], *, error: tuple[int, str] | None = None,
             end: int | None = None) -> dict[str, Any]:
    """A PipelineJob with its root DAG task first (task 1, no parent), as Vertex AI returns it."""
    display = job_id.rsplit("-", 1)[0]
    root_state = {"PIPELINE_STATE_FAILED": "FAILED", "PIPELINE_STATE_SUCCEEDED": "SUCCEEDED",
                  "PIPELINE_STATE_CANCELLED": "CANCELLED"}.get(state, "RUNNING")
    root: dict[str, Any] = {"taskId": "1", "taskName": display, "state": root_state, "createTime": T0, "startTime": T0}
    if end is not None:
        root["endTime"] = _t(end)
    p: dict[str, Any] = {
        "name": pipeline_name(job_id), "displayName": display, "createTime": T0, "startTime": T0, "updateTime": _t(end or 5),
        "state": state, "serviceAccount": SA, "labels": {"vertex-ai-pipelines-run-billing-id": "7301837510375030784"},
        "runtimeConfig": {"gcsOutputDirectory": "gs://ml-proj-pipelines/pipeline_root"},
        "jobDetail": {"pipelineContext": {"name": f"projects/{PROJECT_NUMBER}/locations/{REGION}/metadataStores/default/contexts/{display}"},
                      "taskDetails": [root, *tasks]},
    }
    if end is not None:
        p["endTime"] = _t(end)
    if error is not None:
        p["error"] = {"code": error[0], "message": error[1]}
        root["error"] = {"code": error[0], "message": error[1]}
    return p


def dag_error(failed: str, job_id: str = "4961402339436314624") -> tuple[int, str]:
    # Worded as Vertex AI reports a failed DAG (code 9 wraps whatever the task's own error was).
    return (9, (f"The DAG failed because some tasks failed. The failed tasks are: [{failed}].; Job (project_id = {PROJECT}, "
               f"job_id = {job_id}) is failed due to the above error.; Failed to handle the job: "
               f"{{project_number = {PROJECT_NUMBER}, job_id = {job_id}}}"))


def log_entry(job_id: str, severity: str, text: str, minute: int, *, task_name: str | None = None, custom_job: str | None = None,
              insert_id: str = "") -> dict[str, Any]:
    """A LogEntry of the pipeline's events log, or of one task's custom job (resource ml_job)."""
    if custom_job is not None:
        return {"logName": f"projects/{PROJECT}/logs/workerpool0-0", "insertId": insert_id or f"{custom_job}-{minute}",
                "resource": {"type": "ml_job", "labels": {"job_id": custom_job, "project_id": PROJECT, "task_name": "workerpool0-0"}},
                "labels": {"ml.googleapis.com/endpoint": "", "compute.googleapis.com/resource_id": "7301837510375"},
                "severity": severity, "textPayload": text, "timestamp": _t(minute), "receiveTimestamp": _t(minute)}
    labels = {"pipeline_job_id": job_id}
    if task_name:
        labels["task_name"] = task_name
    return {"logName": f"projects/{PROJECT}/logs/aiplatform.googleapis.com%2Fpipeline_job_events",
            "insertId": insert_id or f"{job_id}-{minute}",
            "resource": {"type": "aiplatform.googleapis.com/PipelineJob",
                         "labels": {"pipeline_job_id": job_id, "location": REGION, "resource_container": f"projects/{PROJECT_NUMBER}"}},
            "labels": labels, "severity": severity, "jsonPayload": {"message": text}, "timestamp": _t(minute), "receiveTimestamp": _t(minute)}


# ---------------------------------------------------------------- scenarios

# Quota while provisioning: vertex-ai-samples#3479 and #700 (code 8, "The following quota metrics exceed quota limits").
QUOTA_MSG = ("com.google.cloud.ai.platform.common.errors.AiPlatformException: code=RESOURCE_EXHAUSTED, message=The following "
             "quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus, cause=null; "
             "Failed to create custom job for the task. Task: Project number: " + PROJECT_NUMBER + ", Job id: 4961402339436314624, "
             "Task id: 3, Task name: train-model, Task state: DRIVER_SUCCEEDED")
# Permission on a bucket: statmike/vertex-ai-mlops#60 (tests/corpus/036) and the storage 403 wording of google-cloud-storage.
PERM_MSG = (f"google.api_core.exceptions.Forbidden: 403 GET https://storage.googleapis.com/storage/v1/b/ml-proj-data/o?prefix=train: "
            f"{SA} does not have storage.objects.list access to the Google Cloud Storage bucket. Permission 'storage.objects.list' "
            f"denied on resource (or it may not exist).")
PRECOND_MSG = ("Failed to import artifact: the input path gs://ml-proj-data/datasets/2026-11-28/train.jsonl does not exist. "
               "Check that the upstream task wrote it or that the URI is correct.")


def scenario(kind: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any] | None]:
    """(pipeline payloads in serving order, log entries, custom job) for one named scenario."""
    match kind:
        case "quota":
            jid = "train-pipeline-20261129160000"
            tasks = [task(2, "preprocess", "SUCCEEDED", start=1, end=6, job="1111"),
                     task(3, "train-model", "FAILED", start=6, end=7, error=(8, QUOTA_MSG)),
                     task(4, "evaluate", "NOT_TRIGGERED"), task(5, "deploy", "NOT_TRIGGERED")]
            logs = [log_entry(jid, "ERROR", QUOTA_MSG, 7, task_name="train-model")]
            return [pipeline(jid, "PIPELINE_STATE_FAILED", tasks, error=dag_error("train-model"), end=8)], logs, None
        case "permission":
            jid = "ingest-pipeline-20261129160000"
            tasks = [task(2, "load-data", "FAILED", start=1, end=3, error=(7, PERM_MSG), job="2222"),
                     task(3, "train-model", "NOT_TRIGGERED")]
            logs = [log_entry(jid, "ERROR", "Traceback (most recent call last):\n  File \"/app/load.py\", line 41, in <module>\n"
                                            "    blobs = list(bucket.list_blobs(prefix='train'))\n" + PERM_MSG, 3, custom_job="2222")]
            return [pipeline(jid, "PIPELINE_STATE_FAILED", tasks, error=dag_error("load-data"), end=4)], logs, None
        case "precondition":
            jid = "eval-pipeline-20261129160000"
            tasks = [task(2, "importer", "FAILED", start=1, end=2, error=(9, PRECOND_MSG)),
                     task(3, "evaluate", "NOT_TRIGGERED")]
            return [pipeline(jid, "PIPELINE_STATE_FAILED", tasks, error=dag_error("importer"), end=3)], [], None
        case "upstream":
            jid = "feature-pipeline-20261129160000"
            err = (3, ("The replica workerpool0-0 exited with a non-zero status of 1. To find out more about why your job exited please check the logs: "
                      f"https://console.cloud.google.com/logs/viewer?project={PROJECT_NUMBER}&resource=ml_job%2Fjob_id%2F3333&advancedFilter=resource.type%3D%22ml_job%22%0Aresource.labels.job_id%3D%223333%22"))
            tasks = [task(2, "fetch-raw", "SUCCEEDED", start=1, end=4, job="1112"),
                     task(3, "build-features", "FAILED", start=4, end=9, error=err, job="3333"),
                     *(task(i, n, "NOT_TRIGGERED") for i, n in enumerate(["split", "train-model", "evaluate", "compare", "deploy"], start=4))]
            logs = [log_entry(jid, "ERROR", 'Traceback (most recent call last):\n  File "/app/features.py", line 88, in <module>\n'
                                            "    df = pd.read_parquet(src)\nKeyError: 'user_id'", 8, custom_job="3333"),
                    log_entry(jid, "INFO", "Reading gs://ml-proj-data/raw/", 5, custom_job="3333")]
            return [pipeline(jid, "PIPELINE_STATE_FAILED", tasks, error=dag_error("build-features"), end=10)], logs, None
        case "running-then-fails":
            jid = "nightly-pipeline-20261129160000"
            running = pipeline(jid, "PIPELINE_STATE_RUNNING", [task(2, "preprocess", "SUCCEEDED", start=1, end=3, job="1113"),
                                                               task(3, "train-model", "RUNNING", start=3, job="4444"),
                                                               task(4, "evaluate", "PENDING")])
            failed = pipeline(jid, "PIPELINE_STATE_FAILED", [task(2, "preprocess", "SUCCEEDED", start=1, end=3, job="1113"),
                                                             task(3, "train-model", "FAILED", start=3, end=9, error=(8, QUOTA_MSG), job="4444"),
                                                             task(4, "evaluate", "NOT_TRIGGERED")], error=dag_error("train-model"), end=10)
            return [running, running, failed], [log_entry(jid, "ERROR", QUOTA_MSG, 9, task_name="train-model")], None
        case "succeeded":
            jid = "daily-pipeline-20261129160000"
            tasks = [task(2, "preprocess", "SUCCEEDED", start=1, end=3, job="1114"),
                     task(3, "train-model", "SUCCEEDED", start=3, end=20, job="5555"),
                     task(4, "evaluate", "SUCCEEDED", start=20, end=25)]
            return [pipeline(jid, "PIPELINE_STATE_SUCCEEDED", tasks, end=26)], [], None
        case "custom-job":
            cj = {"name": custom_job_name("6666"), "displayName": "train-lora", "state": "JOB_STATE_FAILED",
                  "createTime": T0, "startTime": _t(1), "endTime": _t(2), "updateTime": _t(2),
                  "jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "g2-standard-8", "acceleratorType": "NVIDIA_L4",
                                                                   "acceleratorCount": 1}, "replicaCount": "1",
                                                   "containerSpec": {"imageUri": "us-docker.pkg.dev/ml-proj/train/lora:latest"}}],
                              "serviceAccount": SA},
                  # stable-diffusion-on-gcp#12 (tests/corpus/006)
                  "error": {"code": 8, "message": "The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus"}}
            return [], [], cj
    raise ValueError(f"unknown scenario {kind}")


def load(fake: VertexFake, kind: str) -> str:
    """Serve one scenario; return the id a user would pass to --vertex-pipeline."""
    payloads, logs, cj = scenario(kind)
    fake.log_entries.extend(logs)
    if cj is not None:
        fake.add_custom_job(cj)
        return cj["name"].rsplit("/", 1)[1]
    fake.add_pipeline(*payloads)
    return payloads[0]["name"].rsplit("/", 1)[1]


def main() -> None:
    """Serve every scenario on loopback until Ctrl-C (docs and manual runs): python -m tests.fakes.vertex_api"""
    import sys

    fake = VertexFake()
    with fake:
        ids = {k: load(fake, k) for k in ("quota", "permission", "precondition", "upstream", "running-then-fails", "succeeded", "custom-job")}
        print(f"export ML_SKILLS_VERTEX_ENDPOINT={fake.endpoint} ML_SKILLS_LOGGING_ENDPOINT={fake.endpoint}", flush=True)
        for k, v in ids.items():
            print(f"{k}: --vertex-pipeline {v} --project {PROJECT} --region {REGION}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            sys.exit(0)


if __name__ == "__main__":
    main()
