"""`--wandb RUN`: local run directories written by the real wandb library (offline mode), and the
public API through the real wandb client against a loopback fake of W&B's GraphQL API."""

from __future__ import annotations

import io
import json
import shutil
import socket
import time

import pytest
from ml_skills.collectors import wandb as wandb_collector
from ml_skills.engine.pipeline import DiagnoseRequest
from ml_skills.errors import InputError, SourceTimeout, TargetNotFound

from .conftest import check_failed_run
from .training import train
from .wandb_fake import FakeRun, FakeWandb

KEY = "0123456789abcdef0123456789abcdef01234567"


# ---------------------------------------------------------------- offline runs (real wandb)


@pytest.mark.parametrize(
    "kind, cause, status",
    [("nan", "nan-inf", "crashed"), ("diverging", "optimization-divergence", "diverged"), ("healthy", None, "completed"),
     ("precursor", "nan-inf", "crashed")],
)
def test_cli_diagnoses_offline_runs_from_their_directory(offline_runs, tmp_path, kind, cause, status):
    proc, report = check_failed_run("--wandb", str(offline_runs[kind]), out=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert report["target_kind"] == "wandb"
    assert report["primary_cause"] == cause and report["run_status"] == status
    assert {"loss", "grad_norm", "lr", "throughput", "val_loss"} <= {s["name"] for s in report["trajectory"]}
    if kind == "precursor":  # the same history as from its log: the grad-norm jump cited with its numbers
        assert any("grad_norm" in e["text"] and "-> " in e["text"] and "at step 60, 1 step before the first NaN" in e["text"]
                   for e in report["evidence"]), report["evidence"]


def test_offline_run_lines_up_separate_log_calls_and_reads_config_exit_and_console(offline_runs):
    raw = wandb_collector.collect(DiagnoseRequest(wandb=str(offline_runs["nan"])))
    src, logs = raw.source, raw.logs
    by_step = {p.step: p.values for p in src.metrics}
    assert set(by_step[9]) == {"loss", "grad_norm", "lr", "throughput", "val_loss"}
    assert src.state == "failed" and src.facts["exit code"] == "1"
    assert src.facts["config optimizer"] == "'sgd'" or src.facts["config optimizer"] == "sgd"
    assert any("loss is nan" in line for line in (logs[0].text or "").splitlines())
    assert "output.log" in src.details["artifacts"]


def test_a_killed_run_is_read_up_to_its_last_record(offline_runs):
    src = wandb_collector.collect(DiagnoseRequest(wandb=str(offline_runs["killed"]))).source
    assert src.state in ("running", "crashed") and "no exit record" in src.facts["last write"]
    assert len(src.metrics) <= 40 and all(p.step <= 39 for p in src.metrics)  # what wandb-core had flushed, no more


def test_the_wandb_folder_means_its_latest_run(offline_runs):
    src = wandb_collector.collect(DiagnoseRequest(wandb=str(offline_runs["killed"].parent))).source
    assert src.name.endswith("latest-run") and src.facts["last write"].endswith("no exit record")  # the killed run, written last


def test_damaged_record_log_gives_partial_evidence(offline_runs, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(offline_runs["diverging"], d)
    f = next(d.glob("*.wandb"))
    data = bytearray(f.read_bytes())
    data[_body_byte_near_middle(bytes(data))] ^= 0xFF  # not a padding byte, which no checksum covers
    f.write_bytes(bytes(data))
    src = wandb_collector.collect(DiagnoseRequest(wandb=str(d))).source
    assert src.status == "partial" and any("checksum mismatch" in m for m in src.missing)
    assert src.metrics


def _body_byte_near_middle(data: bytes) -> int:
    """A byte inside the body of the chunk nearest the middle of a .wandb file (7-byte file header, 32 KiB blocks,
    chunks of crc32/length/type and a body)."""
    bodies, block_start = [], 7
    while block_start < len(data):
        block_end = min(len(data), (block_start // 32768 + 1) * 32768)
        at = block_start
        while at + 7 <= block_end:
            length, typ = int.from_bytes(data[at + 4 : at + 6], "little"), data[at + 6]
            if typ == 0 and length == 0:
                break
            if length:
                bodies.append(at + 7 + length // 2)
            at += 7 + length
        block_start = block_end
    return min(bodies, key=lambda b: abs(b - len(data) // 2))


def test_not_a_run_is_a_clear_error(tmp_path):
    with pytest.raises(TargetNotFound, match="no W&B run"):
        wandb_collector.collect(DiagnoseRequest(wandb=str(tmp_path)))
    (tmp_path / "run-x.wandb").write_bytes(b"garbage")
    with pytest.raises(Exception, match="not a W&B run log"):
        wandb_collector.collect(DiagnoseRequest(wandb=str(tmp_path)))
    with pytest.raises(InputError, match="entity/project/run_id"):
        wandb_collector.collect(DiagnoseRequest(wandb="just-a-name"))


# ---------------------------------------------------------------- public API (real client, fake server)


def _rows(kind: str) -> tuple[list[dict], bytes]:
    rows: dict[int, dict] = {}
    out = io.StringIO()
    train(kind, lambda step, d: rows.setdefault(step, {"_step": step, "_runtime": step * 0.1}).update(d), out)
    return [rows[k] for k in sorted(rows)], out.getvalue().encode()


@pytest.fixture(scope="module")
def fake():
    with FakeWandb(KEY) as f:
        for kind, state in (("nan", "crashed"), ("diverging", "failed"), ("healthy", "finished")):
            rows, log = _rows(kind)
            f.runs[f"{kind}01"] = FakeRun(
                state,
                {"optimizer": "sgd", "lr": 0.05},
                rows,
                {"output.log": log, "config.yaml": b"lr: 0.05\n"},
                {"system.gpu.0.memoryAllocatedBytes": 2.1e9, "system.proc.memory.rssMB": 812.0},
            )
        f.runs["big01"] = FakeRun(
            "finished",
            {},
            [{"_step": s, "loss": 2.0 / (1 + s / 100)} for s in range(2600)],
            {f"media/img_{i}.png": b"x" for i in range(70)},
        )
        yield f


@pytest.fixture
def online(fake, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    monkeypatch.setenv("WANDB_BASE_URL", fake.url)
    fake.faults.clear()
    fake.ops.clear()
    fake.times.clear()
    return fake


@pytest.mark.parametrize("kind, cause", [("nan", "nan-inf"), ("diverging", "optimization-divergence"), ("healthy", None)])
def test_cli_diagnoses_online_runs_through_the_real_client(online, tmp_path, kind, cause):
    proc, report = check_failed_run(
        "--wandb", f"team/proj/{kind}01", out=tmp_path, env={"WANDB_API_KEY": KEY, "WANDB_BASE_URL": online.url}
    )
    assert proc.returncode == 0, proc.stderr
    assert report["primary_cause"] == cause
    assert f"Run: wandb team/proj/{kind}01" in proc.stdout
    assert "System memory peaks: system.gpu.0.memoryAllocatedBytes=2.1e+09" in proc.stdout
    blob = proc.stdout + proc.stderr + json.dumps(report)
    assert KEY not in blob


def test_every_history_page_and_file_page_is_read(online):
    src = wandb_collector.collect(DiagnoseRequest(wandb="team/proj/big01")).source
    assert len(src.metrics) == 2600 and src.metrics[-1].step == 2599
    assert [o for o, _ in online.ops].count("HistoryPage") >= 3  # 1000 rows a page
    assert len(src.details["artifacts"]) == 70 and [o for o, _ in online.ops].count("RunFiles") == 2
    assert not src.missing


def test_secrets_in_tracker_config_and_files_never_reach_the_output(online, tmp_path):
    """Fresh fake secrets of every kind in the run's config (tracker params) and in its console log."""
    from tests.security.fakes import Planted
    from tests.security.figures import record

    p = Planted()
    rows, log = _rows("nan")
    config = {"optimizer": "sgd", "lr": 0.05, **{k.replace("-", "_"): v for k, v in p.values.items()},
              "hf_token": p.values["hf"], "wandb_api_key": p.values["wandb-hex"], "service_account": p.sa_json}
    online.runs["leaky01"] = FakeRun("crashed", config, rows, {"output.log": "\n".join(p.log_lines()).encode() + b"\n" + log})
    try:
        proc, report = check_failed_run("--wandb", "team/proj/leaky01", "--format", "json", out=tmp_path,
                                        env={"WANDB_API_KEY": KEY, "WANDB_BASE_URL": online.url})
    finally:
        del online.runs["leaky01"]
    assert proc.returncode == 0, proc.stderr
    assert report is not None and report["primary_cause"] == "nan-inf"
    blob = proc.stdout + proc.stderr + json.dumps(report)
    assert p.leaks(blob) == [] and KEY not in blob
    assert report["redactions"] > 0
    planted = sum(t.count(x) for x in p.all_secrets() for t in (json.dumps(config), "\n".join(p.log_lines())))
    record("secret instances planted", "W&B run config (tracker params) and console log", planted)
    record("channels checked, no secret found", "CLI on a W&B run: stdout, stderr, report", 3)


def test_online_console_log_is_fetched_and_scanned(online):
    raw = wandb_collector.collect(DiagnoseRequest(wandb="team/proj/nan01"))
    src, logs = raw.source, raw.logs
    assert logs and any("RuntimeError: loss is nan" in line for line in (logs[0].text or "").splitlines())
    assert src.state == "crashed" and src.facts["config optimizer"] in ("sgd", "'sgd'")


def test_429_is_retried_after_the_servers_retry_after(online):
    online.faults["Run"] = [("status", 429, {"Retry-After": "2"})]
    src = wandb_collector.collect(DiagnoseRequest(wandb="team/proj/healthy01")).source
    runs = [t for op, t in online.times if op == "Run"]
    assert len(runs) == 2 and runs[1] - runs[0] >= 1.9
    assert src.metrics and not src.missing


def test_persistent_500_on_history_is_partial_evidence(online, tmp_path):
    online.faults["HistoryPage"] = [("status", 500)] * 10
    proc, report = check_failed_run(
        "--wandb", "team/proj/nan01", out=tmp_path, env={"WANDB_API_KEY": KEY, "WANDB_BASE_URL": online.url}
    )
    assert proc.returncode == 0, proc.stderr
    assert "Missing: history after 0 rows: W&B failed on history" in proc.stdout and "HTTP 500" in proc.stdout
    assert report["primary_cause"] == "nan-inf"  # still found, in the console log that did arrive


def test_a_slow_drip_is_cut_at_the_deadline(online, monkeypatch):
    """Each byte comes well inside the per-read timeout; wandb-core's own bound on a whole request (the
    collector passes it a per-call timeout from its deadline) ends the call, with its bounded retries:
    the whole answer, one byte per 0.1 s, would take minutes."""
    monkeypatch.setenv("ML_SKILLS_TRACKER_TIMEOUT", "3")
    online.faults["Run"] = [("drip", 0.1)] * 10
    t0 = time.monotonic()
    with pytest.raises(SourceTimeout, match="W&B did not answer run team/proj/healthy01 in time"):
        wandb_collector.collect(DiagnoseRequest(wandb="team/proj/healthy01"))
    assert time.monotonic() - t0 < 60  # far below the drip's own length: the call was cut


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda f, env: env.update(WANDB_API_KEY="f" * 40), "W&B refused run team/proj/nan01"),
        (lambda f, env: f.faults.update(Run=[("body", b"<html>bad gateway</html>")]), "malformed answer"),
        (lambda f, env: None, "W&B has no run team/proj/missing1"),
    ],
    ids=["401", "malformed", "404"],
)
def test_api_faults_are_one_line_errors(online, tmp_path, setup, message):
    env = {"WANDB_API_KEY": KEY, "WANDB_BASE_URL": online.url}
    setup(online, env)
    run = "team/proj/missing1" if "404" in message or "no run" in message else "team/proj/nan01"
    proc, report = check_failed_run("--wandb", run, out=tmp_path, env=env)
    assert proc.returncode == 2 and report is None
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert KEY not in proc.stderr and "f" * 40 not in proc.stderr


def test_server_down_is_connection_refused(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    proc, _ = check_failed_run(
        "--wandb", "team/proj/nan01", out=tmp_path, env={"WANDB_API_KEY": KEY, "WANDB_BASE_URL": f"http://127.0.0.1:{port}"}
    )
    assert proc.returncode == 2 and "connection refused" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and time.monotonic() - t0 < 60


def test_a_port_with_403_in_it_is_no_permission_error():
    """Verbatim from the clean-clone CI on f71bb01: the fake had drawn port 40341, and '403' in the URL made an HTTP 503
    read as 'W&B refused ... check WANDB_API_KEY'. Only a status code standing alone counts."""
    text = "POST http://127.0.0.1:40341/graphql giving up after 4 attempt(s) while retrying: HTTP 503: injected HTTP 503"
    err = wandb_collector._error(RuntimeError(text), "the runs of W&B project lab/study")
    assert str(err).startswith("W&B failed on the runs of W&B project lab/study: ") and "WANDB_API_KEY" not in str(err)
    err = wandb_collector._error(RuntimeError("POST http://127.0.0.1:8080/graphql: HTTP 403: Forbidden"), "run a/b/c")
    assert str(err).startswith("W&B refused run a/b/c")
