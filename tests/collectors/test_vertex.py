"""Vertex AI pipelines and custom jobs, and their Cloud Logging errors, read by the real client libraries.

google-cloud-aiplatform (aiplatform_v1, REST) and google-cloud-logging (JSON API) talk to a loopback
fake of their wire API (tests/fakes/vertex_api.py) with anonymous credentials; ML_SKILLS_*_ENDPOINT
point them at it, exactly as a user points them at an emulator.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ml_skills.collectors import gcp, vertex
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.errors import InputError, TargetNotFound
from ml_skills.models import EvidenceStatus, RunStatus

from tests.fakes.vertex_api import PROJECT, PROJECT_NUMBER, REGION, Fault, VertexFake, load, log_entry, pipeline_name
from tests.security.figures import record

SECRET_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    with VertexFake() as f:
        monkeypatch.setenv(gcp.VERTEX_ENV, f.endpoint)
        monkeypatch.setenv(gcp.LOGGING_ENV, f.endpoint)
        monkeypatch.setenv(gcp.TIMEOUT_ENV, "2")
        yield f


def run(job: str, **kw):
    return diagnose(DiagnoseRequest(vertex_pipeline=job, project=kw.pop("project", PROJECT), region=REGION, once=True, **kw))


# ---------------------------------------------------------------- scenarios


@pytest.mark.parametrize("scenario, primary, state, failed, signal_words", [
    ("quota", "cloud-permissions-quota", "FAILED", "train-model", ["RESOURCE_EXHAUSTED / quota", "custom_model_training_nvidia_a100_gpus", "region"]),
    ("permission", "cloud-permissions-quota", "FAILED", "load-data", ["IAM", "compute@developer.gserviceaccount.com", "not at fault"]),
    ("precondition", "pipeline-orchestration", "FAILED", "importer", ["FAILED_PRECONDITION", "missing input data or artifact path"]),
    ("custom-job", "cloud-permissions-quota", "FAILED", None, ["quota", "custom_model_training_nvidia_l4_gpus"]),
])
def test_failure_scenarios_name_the_cause_and_its_field_meaning(fake: VertexFake, scenario, primary, state, failed, signal_words):
    d = run(load(fake, scenario))
    assert d.primary_cause is not None and d.primary_cause.value == primary
    assert d.run_status is RunStatus.CRASHED
    assert d.confidence.value == "high"
    label = "Custom job" if scenario == "custom-job" else "Pipeline"
    assert any(line.startswith(f"{label}: projects/{PROJECT}/locations/{REGION}/") for line in d.report_lines)
    assert f"{'Job' if scenario == 'custom-job' else 'Pipeline'} state: {state}" in d.report_lines
    if failed:
        assert f"Failed tasks: {failed}" in d.report_lines
    detail = " ".join(e.text for e in d.evidence if e.kind == "source")
    for w in signal_words:
        assert w in detail, (w, detail)


def test_upstream_failure_names_the_task_to_fix_first(fake: VertexFake):
    d = run(load(fake, "upstream"))
    assert "Failed tasks: build-features" in d.report_lines
    assert "Tasks: 1 succeeded, 1 failed, 0 running, 0 pending, 5 not triggered" in d.report_lines
    radius = next(l for l in d.report_lines if l.startswith("Blast radius:"))
    assert "first failing task build-features" in radius and "last successful task fetch-raw" in radius
    assert "split, train-model, evaluate, compare, deploy" in radius
    texts = " ".join(e.text for e in d.evidence)
    assert "fix task build-features first" in texts
    # the task's own error, from its container log in Cloud Logging, is the proximate cause
    assert "KeyError: 'user_id'" in d.root_cause.proximate


@pytest.mark.parametrize("scenario, command", [
    ("upstream", """gcloud logging read 'resource.type="ml_job" AND resource.labels.job_id="3333"' --project=ml-proj"""),
    ("permission", ("gcloud projects get-iam-policy ml-proj --flatten='bindings[].members' "
                    "--filter=bindings.members:serviceAccount:418029537311-compute@developer.gserviceaccount.com")),
    ("precondition", "gcloud storage ls gs://ml-proj-data/datasets/2026-11-28/train.jsonl"),
])
def test_next_commands_are_read_only_gcloud_for_this_job(fake: VertexFake, scenario, command):
    d = run(load(fake, scenario))
    assert any(c.startswith(command) for c in d.next_commands), d.next_commands
    assert all(c.split()[:2] in (["gcloud", "logging"], ["gcloud", "projects"], ["gcloud", "storage"]) for c in d.next_commands)
    assert all(" read " in c or " get-iam-policy " in c or " ls " in c for c in d.next_commands)


def test_succeeded_pipeline_is_completed_with_nothing_failed(fake: VertexFake):
    d = run(load(fake, "succeeded"))
    assert d.run_status is RunStatus.COMPLETED
    assert d.primary_cause is None
    assert "Pipeline state: SUCCEEDED" in d.report_lines and "Failed tasks: none" in d.report_lines


def test_what_the_real_clients_send(fake: VertexFake):
    jid = load(fake, "upstream")
    run(jid)
    get = fake.calls_to("pipeline")
    assert [c.path for c in get] == [f"/v1/projects/{PROJECT}/locations/{REGION}/pipelineJobs/{jid}"]
    assert "Authorization" not in get[0].headers  # anonymous against a plaintext endpoint
    (logs,) = fake.calls_to("logs")
    assert logs.body["resourceNames"] == [f"projects/{PROJECT}"]
    flt = logs.body["filter"]
    assert f'labels.pipeline_job_id="{jid}"' in flt and "severity>=ERROR" in flt
    assert 'resource.labels.job_id="3333"' in flt  # the failed task's custom job
    assert 'timestamp>="2026-11-29T16:00:00Z"' in flt  # from the pipeline's create time, not the client's 24 h default
    assert logs.body["orderBy"] == "timestamp desc"


def test_full_resource_name_and_numeric_custom_job_id_resolve():
    t = vertex.resolve(f"projects/{PROJECT_NUMBER}/locations/{REGION}/pipelineJobs/p-1", None, None)
    assert (t.kind, t.project, t.region, t.job_id) == ("pipeline", PROJECT_NUMBER, REGION, "p-1")
    assert vertex.resolve("6666", "p", "us-central1").kind == "custom"
    for bad, proj, reg in [("../../x", "p", "us-central1"), ("p-1", None, "us-central1"), ("p-1", "p", "us central1"),
                           (f"projects/a/locations/{REGION}/pipelineJobs/p-1", "b", None)]:
        with pytest.raises(InputError):
            vertex.resolve(bad, proj, reg)


# ---------------------------------------------------------------- CLI end to end, polling


def test_cli_once_prints_the_pipeline_lines_and_writes_json(fake: VertexFake, cli):
    jid = load(fake, "permission")
    proc, report = cli("--vertex-pipeline", jid, "--project", PROJECT, "--region", REGION, "--once")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[1] == f"Pipeline: projects/{PROJECT}/locations/{REGION}/pipelineJobs/{jid}"
    assert "Pipeline state: FAILED" in out and "Failed tasks: load-data" in out
    assert "Primary cause: cloud-permissions-quota" in proc.stdout
    assert report is not None and report["primary_cause"] == "cloud-permissions-quota" and report["target_kind"] == "vertex-pipeline"
    assert len(fake.calls_to("pipeline")) == 1


def test_cli_interval_polls_a_running_pipeline_until_it_fails(fake: VertexFake, cli):
    jid = load(fake, "running-then-fails")
    t0 = time.monotonic()
    proc, report = cli("--vertex-pipeline", jid, "--project", PROJECT, "--region", REGION, "--interval", "1")
    assert proc.returncode == 0, proc.stderr
    assert len(fake.calls_to("pipeline")) == 3  # RUNNING, RUNNING, FAILED
    assert time.monotonic() - t0 >= 2
    assert "Pipeline state: FAILED" in proc.stdout and "Failed tasks: train-model" in proc.stdout
    assert proc.stderr == ""  # progress goes to stderr only when it is a terminal
    assert report["primary_cause"] == "cloud-permissions-quota"


def test_cli_polling_progress_goes_to_a_terminal_stderr(fake: VertexFake, tmp_path: Path):
    import os
    import pty

    jid = load(fake, "running-then-fails")
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--vertex-pipeline", jid, "--project", PROJECT,
                               "--region", REGION, "--interval", "1", "--out-dir", str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=slave, text=True, timeout=120, check=False)
        progress = os.read(master, 65536).decode()
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 0
    assert progress.count(f"{jid}: RUNNING; next check (Ctrl-C to stop): 1 s of 1 s (100%)") == 2  # a countdown per wait
    assert progress.endswith("\r\x1b[K")  # erased before the report
    assert "next check" not in proc.stdout


def test_cli_once_on_a_running_pipeline_reports_running(fake: VertexFake, cli):
    jid = load(fake, "running-then-fails")
    fake.log_entries.clear()  # no error logged yet
    proc, report = cli("--vertex-pipeline", jid, "--project", PROJECT, "--region", REGION, "--once")
    assert "Pipeline state: RUNNING" in proc.stdout and "0 failed, 1 running, 1 pending" in proc.stdout
    assert report["run_status"] == "running"


@pytest.mark.parametrize("args, words", [
    (["--vertex-pipeline", "train-1", "--region", REGION], "needs --project and --region"),
    (["--vertex-pipeline", "../etc/passwd", "--project", PROJECT, "--region", REGION], "is not a Vertex AI pipeline job id"),
    (["--vertex-pipeline", "nope-1", "--project", PROJECT, "--region", REGION, "--once"], "check the id, --project and --region"),
])
def test_cli_bad_input_is_one_line(fake: VertexFake, cli, args, words):
    proc, report = cli(*args)
    assert proc.returncode == 2 and report is None
    assert proc.stderr.count("\n") == 1 and words in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- faults


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("route", ["pipeline", "logs"])
def test_429_with_retry_after_is_honoured_then_succeeds(fake: VertexFake, route):
    jid = load(fake, "quota")
    fake.fail(route, Fault(429, {"Retry-After": "1"}, json.dumps({"error": {"code": 429, "message": "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests", "status": "RESOURCE_EXHAUSTED"}}).encode()))
    t0 = time.monotonic()
    d = run(jid)
    assert time.monotonic() - t0 >= 1.0
    assert len(fake.calls_to(route)) == 2
    assert "Pipeline state: FAILED" in d.report_lines and "Cloud Logging: 1 error event(s) at severity >= ERROR" in d.report_lines
    assert not any(l.startswith("Missing:") for l in d.report_lines)


def test_429_retry_after_past_the_deadline_gives_up_at_once_and_keeps_the_logs(fake: VertexFake):
    jid = load(fake, "quota")
    fake.fail("pipeline", Fault(429, {"Retry-After": "3600"}))
    t0 = time.monotonic()
    d = run(jid)
    assert time.monotonic() - t0 < 5
    assert len(fake.calls_to("pipeline")) == 1
    missing = next(l for l in d.report_lines if l.startswith("Missing: the job itself"))
    assert "429 rate-limited" in missing and "retry after 3600s" in missing and "past the deadline" in missing
    assert "Cloud Logging: 1 error event(s) at severity >= ERROR" in d.report_lines
    assert d.primary_cause is not None and d.primary_cause.value == "cloud-permissions-quota"  # from the log that did arrive


def test_5xx_is_retried_a_bounded_number_of_times(fake: VertexFake):
    jid = load(fake, "precondition")
    fake.fail("pipeline", Fault(503), Fault(500))
    d = run(jid)
    assert len(fake.calls_to("pipeline")) == 3 and "Pipeline state: FAILED" in d.report_lines
    fake.fail("pipeline", *[Fault(502)] * 10)
    d = run(jid)
    assert len(fake.calls_to("pipeline")) == 3 + gcp.MAX_ATTEMPTS
    assert any("502" in l and "after retrying" in l for l in d.report_lines if l.startswith("Missing:"))


@pytest.mark.parametrize("route, what", [("pipeline", "Missing: the job itself"), ("logs", "Missing: Cloud Logging error events")])
def test_a_hang_is_cut_at_the_deadline(fake: VertexFake, monkeypatch: pytest.MonkeyPatch, route, what):
    monkeypatch.setenv(gcp.TIMEOUT_ENV, "0.5")
    jid = load(fake, "quota")
    fake.fail(route, *[Fault(delay=3)] * 5)
    t0 = time.monotonic()
    d = run(jid)
    assert time.monotonic() - t0 < 3.5  # deadline 4 x 0.5 s for the hanging source, the other answers at once
    missing = next(l for l in d.report_lines if l.startswith(what))
    assert "no answer within 0.5s (timeout)" in missing
    assert d.sources[-1].endswith("(partial)")
    assert d.primary_cause is not None and d.primary_cause.value == "cloud-permissions-quota"


def test_connection_refused_names_what_is_missing(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(gcp.VERTEX_ENV, f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv(gcp.LOGGING_ENV, f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv(gcp.TIMEOUT_ENV, "1")
    t0 = time.monotonic()
    d = run("train-pipeline-1")
    assert time.monotonic() - t0 < 10
    missing = [l for l in d.report_lines if l.startswith("Missing:")]
    assert len(missing) == 2 and all("connection refused" in m for m in missing)
    assert d.primary_cause is None and d.sources[-1].endswith("(error)")
    assert d.insufficient_evidence is not None and d.insufficient_evidence.startswith("could not read the job itself")


@pytest.mark.parametrize("route, status, words", [
    ("pipeline", 401, "401 unauthenticated"),
    ("pipeline", 403, "roles/aiplatform.viewer"),
    ("logs", 403, "roles/logging.viewer"),
    ("logs", 401, "Application Default Credentials"),
])
def test_auth_errors_are_not_retried_and_say_which_role(fake: VertexFake, route, status, words):
    jid = load(fake, "quota")
    fake.fail(route, Fault(status, body=json.dumps({"error": {"code": status, "message": f"The caller does not have permission (HF_TOKEN={SECRET_TOKEN})",
                                                               "status": "PERMISSION_DENIED" if status == 403 else "UNAUTHENTICATED"}}).encode()))
    d = run(jid)
    assert len(fake.calls_to(route)) == 1
    missing = " ".join(l for l in d.report_lines if l.startswith("Missing:"))
    assert words in missing
    assert SECRET_TOKEN not in d.model_dump_json()
    assert status == 401 or "[REDACTED]" in missing  # a 403's message is quoted, redacted
    # the other source still arrived and still explains the failure
    assert d.primary_cause is not None and d.primary_cause.value == "cloud-permissions-quota"


@pytest.mark.parametrize("route, body", [
    ("pipeline", b"<html>502 Bad Gateway</html>"),
    ("pipeline", b'{"name": 5, "state": {"x": 1}}'),
    ("logs", b'{"entries": "oops"'),
    ("logs", b'{"entries": [{"timestamp": "yesterday", "textPayload": "x"}]}'),
    ("logs", b"[1, 2]"),
])
def test_malformed_payloads_are_a_clear_message(fake: VertexFake, route, body):
    jid = load(fake, "quota")
    fake.fail(route, Fault(200, body=body))
    d = run(jid)
    missing = [l for l in d.report_lines if l.startswith("Missing:")]
    assert len(missing) == 1 and "malformed answer" in missing[0], missing
    assert len(fake.calls_to(route)) == 1  # a malformed answer is not retried
    assert d.primary_cause is not None  # the other source still diagnoses it


def test_secrets_in_cloud_answers_never_reach_the_output(fake: VertexFake, cli):
    jid = load(fake, "upstream")
    fake.log_entries.append(log_entry(jid, "ERROR", f"export HF_TOKEN={SECRET_TOKEN}; Authorization: Bearer ya29.a0AfB_byC1secretsecretsecret",
                                      9, task_name="build-features"))
    proc, report = cli("--vertex-pipeline", jid, "--project", PROJECT, "--region", REGION, "--once", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert SECRET_TOKEN not in proc.stdout and "ya29.a0AfB_byC1secret" not in proc.stdout
    assert report["redactions"] >= 1
    record("secret instances planted", "Cloud Logging entry of a Vertex pipeline (cloud payload)", 2)


def test_cancel_endpoint_is_served_and_recorded_for_the_real_client(fake: VertexFake):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    jid = load(fake, "running-then-fails")
    client = aiplatform_v1.PipelineServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                                 client_options={"api_endpoint": fake.endpoint})
    client.cancel_pipeline_job(name=f"projects/{PROJECT}/locations/{REGION}/pipelineJobs/{jid}")
    assert fake.cancelled == [pipeline_name(jid)]
    assert fake.calls_to("cancel")[0].method == "POST"


def test_collectors_stay_lazy_and_never_write(tmp_path: Path):
    code = ("import sys, ml_skills.cli, ml_skills.engine.pipeline, ml_skills.collectors.vertex, ml_skills.collectors.cloud_logging;"
            "heavy = [m for m in sys.modules if m.startswith(('google.cloud.aiplatform', 'google.cloud.logging', 'google.api_core'))];"
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_source_status_reflects_what_arrived(fake: VertexFake):
    jid = load(fake, "quota")
    job, problem = vertex.read_job(vertex.resolve(jid, PROJECT, REGION))
    assert problem is None
    src = vertex.build(vertex.resolve(jid, PROJECT, REGION), job, None, None, "Cloud Logging: no answer")
    assert src.status is EvidenceStatus.PARTIAL and src.missing == ["Cloud Logging error events: Cloud Logging: no answer"]
    with pytest.raises(TargetNotFound):
        vertex.read_job(vertex.resolve("missing-1", PROJECT, REGION))
    one = vertex.describe(jid, PROJECT, REGION)
    assert one.status is EvidenceStatus.OK and one.state == "FAILED" and one.facts["first_failing_task"] == "train-model"


_json = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
_fields = ["name", "state", "error", "jobDetail", "serviceAccount", "createTime", "displayName"]
_task_fields = ["taskId", "parentTaskId", "taskName", "state", "error", "startTime", "endTime", "executorDetail"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(job=st.dictionaries(st.sampled_from(_fields), _json, max_size=5),
       tasks=st.lists(st.dictionaries(st.sampled_from(_task_fields), _json, max_size=5), max_size=3))
def test_any_payload_shape_gives_a_report_never_a_traceback(fake: VertexFake, job, tasks):
    """Whatever the wire carries under the real field names, the answer is a report or a clear 'malformed' line."""
    jid = load(fake, "quota")
    if tasks:
        job = {**job, "jobDetail": {"taskDetails": tasks}}
    fake.fail("pipeline", Fault(200, body=json.dumps(job).encode()))
    d = run(jid)
    assert any(l.startswith("Pipeline state:") for l in d.report_lines)
    assert all("Traceback" not in l for l in d.report_lines)


@pytest.mark.parametrize("route, what", [("pipeline", "Missing: the job itself"), ("logs", "Missing: Cloud Logging error events")])
def test_a_slow_drip_is_cut_at_the_deadline(fake: VertexFake, monkeypatch: pytest.MonkeyPatch, route, what):
    """Each byte comes well inside the per-read timeout, so only a total deadline ends the call: the whole
    answer would take minutes (one byte per 0.1 s), the deadline is 4 x 0.5 s."""
    monkeypatch.setenv(gcp.TIMEOUT_ENV, "0.5")
    jid = load(fake, "quota")
    fake.fail(route, *[Fault(drip=0.1)] * 5)
    t0 = time.monotonic()
    d = run(jid)
    assert time.monotonic() - t0 < 30  # far below the drip's own length (minutes): the deadline, not the server, ended it
    missing = next(l for l in d.report_lines if l.startswith(what))
    assert "0.5s" in missing, missing
    assert d.sources[-1].endswith("(partial)")
    assert d.primary_cause is not None and d.primary_cause.value == "cloud-permissions-quota"


def test_a_connection_reset_is_retried_then_succeeds_and_a_persistent_one_is_partial(fake: VertexFake):
    jid = load(fake, "quota")
    fake.fail("pipeline", Fault(reset=True))
    d = run(jid)
    assert len(fake.calls_to("pipeline")) == 2 and "Pipeline state: FAILED" in d.report_lines
    fake.fail("pipeline", *[Fault(reset=True)] * 10)
    d = run(jid)
    assert len(fake.calls_to("pipeline")) == 2 + gcp.MAX_ATTEMPTS  # bounded retries
    missing = next(l for l in d.report_lines if l.startswith("Missing: the job itself"))
    assert "after retrying" in missing, missing
    assert d.primary_cause is not None and d.primary_cause.value == "cloud-permissions-quota"  # from the logs that did arrive
