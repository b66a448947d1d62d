"""Issue 14's eighth round: attacks from outside on surfaces the first seven rounds did not try.

Vertex AI and Cloud Logging answers (through the real client libraries against the loopback fake of their wire
API, tests/fakes/vertex_api.py), offline W&B run folders, shard indexes and planted reports, secret shapes in cloud
payloads, and the repoint question. Each test is one attack that broke a claim of docs/security.md, driven through
the real CLI in a child process or a real MCP client over stdio; each failed on the code before its fix (see
docs/security.md, "Eighth round").
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from tests.fakes.vertex_api import PROJECT, REGION, VertexFake, dag_error, load, log_entry, pipeline, task
from tests.mcp.conftest import Server, call_once, text
from tests.security.test_parser_attacks import _wandb_file

TOKEN = "ghp_" + "Zx9Qw7Er5Ty3Ui1OpAs2Df4Gh6Jk8Lz0XcVbNm"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[VertexFake]:
    """The Vertex AI and Cloud Logging fake; the CLI and the MCP server started by a test inherit its endpoints."""
    with VertexFake() as f:
        monkeypatch.setenv("ML_SKILLS_VERTEX_ENDPOINT", f.endpoint)
        monkeypatch.setenv("ML_SKILLS_LOGGING_ENDPOINT", f.endpoint)
        monkeypatch.setenv("ML_SKILLS_GCP_TIMEOUT", "10")
        yield f


def _cli(*args: str, out: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    done = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", *args, "--out-dir", str(out)],
                          check=False, capture_output=True, text=True, timeout=300)
    report = out / "check-failed-run.json"
    return done, (json.loads(report.read_text()) if report.exists() else None)


_call = call_once


# ---------------------------------------------------------------- Vertex AI and Cloud Logging


def test_a_cloud_logging_answer_nested_too_deep_is_a_malformed_answer_not_an_internal_error(fake: VertexFake, tmp_path: Path) -> None:
    """An entries.list answer whose jsonPayload nests 100,000 deep: google-cloud-logging's json.loads raised
    RecursionError (not ValueError), which left the collector and ended the CLI with 'internal error' (exit 3)."""
    from tests.fakes.vertex_api import Fault

    jid = load(fake, "quota")
    deep = "[" * 100_000 + "]" * 100_000
    body = '{"entries": [{"jsonPayload": {"a": ' + deep + '}, "severity": "ERROR", "logName": "projects/p/logs/x"}]}'
    fake.fail("logs", Fault(200, body=body.encode()))
    done, report = _cli("--vertex-pipeline", jid, "--project", PROJECT, "--region", REGION, "--once", out=tmp_path / "out")
    assert done.returncode in (0, 1), done.stderr[-500:]
    assert "internal error" not in done.stderr
    assert report is not None
    assert any("Cloud Logging" in line and "malformed answer" in line for line in report["report_lines"]), report["report_lines"]
    assert report["primary_cause"] is not None  # the job itself still diagnoses the run


def test_a_pipeline_tasks_own_fields_never_widen_the_log_query_or_a_next_command(fake: VertexFake, tmp_path: Path) -> None:
    """A task whose `mainJob` ends in `77" OR severity>=DEFAULT OR "x`: the id went verbatim into the Cloud Logging
    filter (every entry of the project, at any severity, of any job) and into the gcloud command a person runs; the
    same for a service account in the IAM filter. Only ids of their shape are used now."""
    jid = "evil-pipeline-1"
    hostile = '77" OR severity>=DEFAULT OR "x'
    tasks = [task(2, "train", "FAILED", start=1, end=2, error=(7, "Permission 'storage.objects.list' denied"), job=hostile),
             task(3, "eval", "NOT_TRIGGERED")]
    job = pipeline(jid, "PIPELINE_STATE_FAILED", tasks, error=dag_error("train"), end=3)
    job["serviceAccount"] = 'sa@p.iam.gserviceaccount.com OR bindings.role:"roles/owner"'
    fake.add_pipeline(job)
    done, report = _cli("--vertex-pipeline", jid, "--project", PROJECT, "--region", REGION, "--once", "--format", "json",
                        out=tmp_path / "out")
    assert done.returncode in (0, 1), done.stderr[-500:]
    filters = [c.body["filter"] for c in fake.calls_to("logs")]
    assert filters and all("DEFAULT" not in f and '"x"' not in f for f in filters), filters
    assert report is not None
    commands = [*report["next_commands"], *(f["command"] for f in report["fixes"] if f.get("command"))]
    assert commands
    assert not any("DEFAULT" in c or "roles/owner" in c for c in commands), commands


@pytest.mark.slow
def test_describe_vertex_job_over_a_pipeline_of_20000_tasks_answers_with_a_capped_list(fake: VertexFake, tmp_path: Path) -> None:
    """A pipeline of 100,000 tasks made `describe_vertex_job` answer with 17 MB (every task in `details.tasks`); the
    list is cut to 200, the failed task first, the total counted."""
    jid = "big-pipeline-1"
    tasks = [task(2, "train", "FAILED", start=1, end=2, error=(8, "RESOURCE_EXHAUSTED: quota"), job="1002"),
             *(task(i, f"step-{i}", "NOT_TRIGGERED") for i in range(3, 20_003))]
    fake.add_pipeline(pipeline(jid, "PIPELINE_STATE_FAILED", tasks, error=dag_error("train"), end=3))
    is_error, body, structured = _call(Server(tmp_path), "describe_vertex_job", {"job": jid, "project": PROJECT, "region": REGION})
    assert not is_error, body[:500]
    assert len(body) < 200_000, len(body)
    details = structured["source"]["details"]
    assert details["tasks_total"] == 20_001  # the leaves: the root DAG task is left out
    assert len(details["tasks"]) <= 200 and details["tasks"][0]["name"].endswith("] train [/data " + structured["marker"] + "]")  # marked since the twentieth round


def test_a_project_or_region_ending_in_a_newline_is_refused_before_any_call(fake: VertexFake, tmp_path: Path) -> None:
    """`project: "ml-proj\\n"` passed the `^...$` check (`$` matches before a final newline): the request reached the
    Vertex and Logging APIs, and the error came back over two lines."""
    jid = load(fake, "permission")
    srv = Server(tmp_path)
    for args in ({"job": jid, "project": PROJECT + "\n", "region": REGION}, {"job": jid, "project": PROJECT, "region": REGION + "\n"}):
        is_error, body, _ = _call(srv, "describe_vertex_job", args)
        assert is_error and ("not a GCP project" in body or "not a GCP region" in body), body
    assert fake.calls == []


def test_a_secret_hidden_by_json_escapes_or_in_slack_and_stripe_shapes_never_leaves(fake: VertexFake, tmp_path: Path) -> None:
    """A Cloud Logging payload holding a GitHub token written `\\u0067hp_...`, a Gson-escaped `password\\u003dX`, a Slack
    app-level token (`xapp-`) and a Stripe live key: each came back whole from `describe_vertex_job` (the patterns
    never saw them); the same values sent to an unknown tool stayed in the audit log."""
    jid = load(fake, "upstream")
    password = "Qp7Lm2Zr9Xv4Ws8Nt3Ky"
    xapp = "xapp-1-A0123456789-1234567890123-" + "9f8e7d6c5b4a" * 5
    stripe = "sk_live_" + "51HxYzAbCdEfGhIjKlMnOpQr0123"
    entry = log_entry(jid, "ERROR", "", 9, task_name="build-features")
    entry["jsonPayload"] = {"env": "\\u0067hp_" + TOKEN[4:], "conf": "db_password\\u003d" + password, "slack": xapp, "billing": stripe}
    # Gson writes `=` as \u003d inside strings: a launch line logged by a Java launcher
    gson = log_entry(jid, "ERROR", "job: {\"args\":\"--lr 0.1 db_password\\u003d" + password + "\"}", 9, task_name="build-features")
    fake.log_entries.extend([entry, gson])
    srv = Server(tmp_path)
    is_error, body, structured = _call(srv, "describe_vertex_job", {"job": jid, "project": PROJECT, "region": REGION})
    assert not is_error, body[:500]
    assert "build-features" in body
    seen = body + json.dumps(structured)
    _call(srv, "no_such_tool", {"note": "\\u0067hp_" + TOKEN[4:], "slack": xapp, "billing": stripe})
    seen += srv.audit.read_text()
    for secret in (TOKEN[4:], password, xapp[8:], stripe[8:]):
        assert secret[:16] not in seen and secret[-16:] not in seen, secret


# ---------------------------------------------------------------- bounded JSON


def test_a_shard_index_of_millions_of_tiny_values_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A 60 MiB `model.safetensors.index.json` of `[{},{},...]` (under the index's 64 MiB cap): parsed whole, 3 GB of
    memory and 29 s for one file. Text that could hold more than 2,000,000 values is refused before parsing now."""
    ck = tmp_path / "run" / "checkpoint-1"
    ck.mkdir(parents=True)
    n = 60 * 2**20 // 3
    (ck / "model.safetensors.index.json").write_text("[" + "{}," * (n - 1) + "{}]")
    out = tmp_path / "out"
    measure = ("import resource, subprocess, sys; "
               "r = subprocess.run(sys.argv[1:], capture_output=True, timeout=300); "
               "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "ml_skills.cli", "check-failed-run",
                           str(tmp_path / "run"), "--out-dir", str(out)], check=True, capture_output=True, text=True, timeout=400)
    rc, peak_kib = map(int, done.stdout.split())
    assert rc in (0, 1), done.stdout
    assert peak_kib < 600 * 1024, f"peak {peak_kib // 1024} MiB"
    report = json.loads((out / "check-failed-run.json").read_text())
    info = next(c for c in report["artifacts"]["checkpoints"] if c["path"].endswith("checkpoint-1"))
    assert info["valid"] is False and "not parsed" in info["reason"]


def test_read_report_on_a_planted_report_of_millions_of_tiny_values_stays_in_bounded_memory(tmp_path: Path) -> None:
    """A 30 MiB `check-failed-run.json` of `[{},{},...]` planted in a run folder: `read_report` parsed it whole, and the
    MCP server grew to 1.6 GB resident before answering that it was not a report."""
    run = tmp_path / "run"
    run.mkdir()
    n = 30 * 2**20 // 3
    (run / "check-failed-run.json").write_text("[" + "{}," * (n - 1) + "{}]")
    srv = Server(tmp_path)
    got: list[tuple[bool, str, int]] = []

    async def go() -> None:
        async with srv.client() as c:
            res = await c.call_tool("read_report", {"path": str(run / "check-failed-run.json"), "fields": ["root_cause"]})
            server = next(p for p in psutil.Process().children(recursive=True) if "ml_skills.mcp_tools.app" in " ".join(p.cmdline()))
            peak = int(next(x for x in Path(f"/proc/{server.pid}/status").read_text().splitlines() if x.startswith("VmHWM")).split()[1])
            got.append((bool(res.is_error), text(res), peak))

    anyio.run(go)
    is_error, body, peak_kib = got[0]
    assert is_error and "Traceback" not in body, body
    assert peak_kib < 500 * 1024, f"server peak {peak_kib // 1024} MiB"


# ---------------------------------------------------------------- W&B run folders


def _history(step: int) -> bytes:
    from wandb.proto import wandb_internal_pb2 as pb

    rec = pb.Record()
    rec.history.step.num = step
    for k, v in (("_step", str(step)), ("loss", str(2.0 - step * 0.01))):
        it = rec.history.item.add()
        it.key, it.value_json = k, v
    return rec.SerializeToString()


def test_a_wandb_run_named_with_30_mb_or_a_token_at_a_cut_never_comes_back_whole(tmp_path: Path) -> None:
    """An offline run whose run record's display name is 30 MB: `get_wandb_run` returned it whole (a 31 MB answer);
    and a config value holding a token across its 120-character cut showed the token's first 15 characters."""
    from wandb.proto import wandb_internal_pb2 as pb

    run = tmp_path / "wandb" / "offline-run-1"
    (run / "files").mkdir(parents=True)
    rec = pb.Record()
    rec.run.run_id, rec.run.project, rec.run.display_name = "abc123", "proj", "N" * (30 * 2**20)
    cfg = rec.run.config.update.add()
    cfg.key, cfg.value_json = "notes", json.dumps({"value": "x" * 100 + " " + TOKEN})
    _wandb_file(run / "run-1.wandb", [rec.SerializeToString(), *(_history(i) for i in range(20))])
    is_error, body, structured = _call(Server(tmp_path), "get_wandb_run", {"run": str(run)})
    assert not is_error, body[:500]
    assert len(body) < 1_000_000, len(body)
    assert "notes" in body  # the config entry is shown
    assert TOKEN[:12] not in body + json.dumps(structured)


def test_a_folder_named_like_a_wandb_file_never_hides_the_run(tmp_path: Path) -> None:
    """`a.wandb/`, a folder, beside the run's `z.wandb`: the reader took the first name and the whole run was refused
    as 'a directory' (exit 2), its history never read."""
    run = tmp_path / "offline-run-1"
    (run / "files").mkdir(parents=True)
    (run / "a.wandb").mkdir()
    _wandb_file(run / "z.wandb", [_history(i) for i in range(20)])
    done, report = _cli("--wandb", str(run), "--format", "json", out=tmp_path / "out")
    assert done.returncode in (0, 1), done.stderr[-500:]
    assert report is not None
    assert any("History: 20 steps" in line for line in report["report_lines"]), report["report_lines"]
    assert any(t["name"] == "loss" and t["count"] == 20 for t in report["trajectory"])


# ---------------------------------------------------------------- the repoint question


def _safetensors(path: Path) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)


def _repoint(srv: Server, pointer: Path, ckpt: Path, elicit: Any = None) -> tuple[bool, str]:
    got: list[tuple[bool, str]] = []

    async def go() -> None:
        async with srv.client(elicit=elicit) as c:
            res = await c.call_tool("request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": str(pointer),
                                                                  "checkpoint": str(ckpt)}})
            got.append((bool(res.is_error), text(res)))

    anyio.run(go)
    return got[0]


def test_a_repoint_whose_path_the_question_would_cut_is_refused(tmp_path: Path) -> None:
    """Two checkpoints whose relative names share their first 500 characters: the question showed the new pointer
    content and the checkpoint's path cut at 500 ('...'), so the person approved a name whose end they never saw."""
    from tests.mcp.conftest import answer

    run = tmp_path / "run"
    _safetensors(run / "ck-200.safetensors")
    deep = run / ("A" * 250) / ("B" * 250)
    _safetensors(deep / "C-good.safetensors")
    _safetensors(deep / "C-evil.safetensors")
    (run / "latest").write_text("ck-200.safetensors\n")
    person = answer("accept")
    is_error, body = _repoint(Server(tmp_path), run / "latest", deep / "C-evil.safetensors", elicit=person)
    assert (run / "latest").read_text() == "ck-200.safetensors\n"
    assert is_error and "too long to show whole" in body, body
    assert all('..."' not in q for q in person.shown)  # type: ignore[attr-defined]


def test_a_pointer_on_a_checkpoint_of_an_unknown_format_is_a_rollback_and_asks(tmp_path: Path) -> None:
    """`latest` naming an orbax checkpoint folder (`_CHECKPOINT_METADATA`, `state/`): the inspector knows no weights file
    there and called it invalid, so moving the pointer to an older safetensors checkpoint ran as a safe repoint, asked
    of no one. A folder holding data of an unknown format is not known to be bad: it asks now (an empty one still does not)."""
    run = tmp_path / "run"
    _safetensors(run / "checkpoint-100.safetensors")
    orbax = run / "checkpoint_200"
    (orbax / "state" / "d").mkdir(parents=True)
    (orbax / "_CHECKPOINT_METADATA").write_text(json.dumps({"item_handlers": {"state": "StandardCheckpointHandler"}}))
    (orbax / "state" / "_METADATA").write_text(json.dumps({"tree_metadata": {"('params', 'w')": {"key_metadata": []}}}))
    (orbax / "state" / "manifest.ocdbt").write_bytes(os.urandom(300))
    (orbax / "state" / "d" / "0a1b2c").write_bytes(os.urandom(4096))
    (run / "latest").write_text("checkpoint_200\n")
    srv = Server(tmp_path)
    is_error, body = _repoint(srv, run / "latest", run / "checkpoint-100.safetensors")  # a client that cannot ask
    assert (run / "latest").read_text() == "checkpoint_200\n", body
    assert "no-elicitation" in body or "rollback" in body, body
    (run / "empty_ck").mkdir()
    (run / "latest").write_text("empty_ck\n")
    is_error, body = _repoint(srv, run / "latest", run / "checkpoint-100.safetensors")
    assert not is_error and (run / "latest").read_text().strip() == "checkpoint-100.safetensors", body
