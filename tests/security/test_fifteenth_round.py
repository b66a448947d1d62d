"""Issue 14's fifteenth round: attacks from outside beside the fourteenth round's fixes (bash's variables refused in a restart
line, `triage_runs`' globs confined, towers of combining marks, quoted-data marking, key-line-shaped paths, XML secret
elements) and at the gaps it listed as not promised.

Each test is one attack that broke a claim of docs/security.md, or a listed gap now closed, driven through the real CLI
in a child process or a real MCP client over stdio, with real files; each failed on the code before its fix (see
docs/security.md, "Fifteenth round").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills.collectors.cloud_logging import MAX_TEXT

from tests.fakes.vertex_api import PROJECT, REGION, load, log_entry
from tests.mcp.conftest import Server, answers
from tests.security.test_eighth_round import _call, fake  # noqa: F401 - the Vertex and Logging fake fixture

pytestmark = pytest.mark.slow  # real child processes and servers


def test_triage_runs_gives_a_link_out_of_the_roots_one_answer_whether_its_target_exists_or_not(tmp_path: Path) -> None:
    """Promise 5: a refusal never names where a link leads, and a link out of the roots gets one answer whether its target
    exists or not. `triage_runs` asked why a run could not be read before it asked the roots: over a folder of runs, or a
    glob, a log `b.log -> /outside/nothing.log` came back as "is a dangling symlink (to /outside/nothing.log)" while
    `a.log -> /outside/exists.log` was "outside the allowed roots": where the link leads, and whether any file exists. Now
    both get the roots' one answer; the run inside is still triaged."""
    r, o = tmp_path / "root", tmp_path / "outside"
    (r / "runs" / "good").mkdir(parents=True)
    o.mkdir()
    (r / "runs" / "good" / "train.log").write_text("step 1 loss 1.0\nstep 2 loss nan\nFloatingPointError: nan\n")
    (o / "exists_payroll.log").write_text("step 1 loss 1.0\n")
    shown = []
    for name, target in (("a.log", o / "exists_payroll.log"), ("b.log", o / "missing_payroll.log")):
        (r / "runs" / name).symlink_to(target)
        shown.append(answers(Server(tmp_path, roots=[r]), [("triage_runs", {"targets": [str(r / "runs")]}),
                                                                 ("triage_runs", {"targets": [str(r / "runs" / "*")]})]))
        (r / "runs" / name).unlink()
    for one_setup in shown:
        for a in one_setup:
            assert "payroll" not in a and "dangling" not in a, a
            assert "outside the allowed roots" in a and "step 2 loss nan" in a, a


def test_an_xml_secret_with_attributes_or_cdata_and_a_url_password_before_no_host_never_leave(tmp_path: Path) -> None:
    """The fourteenth round masked an XML element named for a secret (`<password>X</password>`); the same element with an
    attribute (`<password type="text">`, `<ns:password xmlns:ns="...">`) or its value in a CDATA section kept X in clear, and
    so did an element named for a secret by its `name` or `key` attribute (`<entry key="password">X</entry>`, Java's XML
    properties; `<string name="api_key">X</string>`, an Android resource). A URL password with no host after its `@` (a
    libpq or SQLAlchemy URL to a Unix socket, `postgresql://u:X@/db?host=/cloudsql/...`, Cloud SQL's documented form; a tab
    or a line break after the `@`; the line's end) was kept too: the host had to hold a character. Before: in clear in the
    CLI (text, JSON report), `read_log_tail` and `grep_log`. `<max_tokens>4096</max_tokens>` is left alone."""
    from tests.security.test_twelfth_round import _ALNUM, _fake, _printed_and_shown

    values = [_fake(_ALNUM, 20) for _ in range(9)]
    lines = [f'<password type="text">{values[0]}</password>', f'<ns:password xmlns:ns="urn:x">{values[1]}</ns:password>',
             f"<password><![CDATA[ {values[2]} ]]></password>", f'<entry key="db.password">{values[3]}</entry>',
             f'<string name="api_key">{values[4]}</string>',
             f"DATABASE_URL=postgresql+psycopg2://app:{values[5]}@/runs?host=/cloudsql/proj:us-central1:db",
             f"redis://:{values[6]}@\tcache:6379", f"broker https://u:{values[7]}@", f"mongodb://u:{values[8]}@ host:27017",
             "<max_tokens>4096</max_tokens>"]
    shown = _printed_and_shown(tmp_path, lines)
    for out in shown:
        assert not any(v in out for v in values), out
    assert "<max_tokens>4096</max_tokens>" in shown[-1], shown[-1]


_CLOUD_TRAIN = """import os
open({ran!r}, 'a').write('ran\\n')
if os.environ.get('AWS_CONFIG_FILE') or os.environ.get('AWS_SHARED_CREDENTIALS_FILE'):
    import botocore.session
    botocore.session.get_session().get_credentials()
if os.environ.get('GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES'):
    import google.auth, google.auth.transport.requests
    try:
        google.auth.default()[0].refresh(google.auth.transport.requests.Request())
    except Exception:
        pass
"""


def test_a_recorded_command_never_names_a_file_that_makes_a_cloud_client_run_a_program(tmp_path: Path) -> None:
    """Promise 2 refuses a variable that makes a library the script imports load code or start a program. A cloud client's
    config file can name a program it runs for credentials: `AWS_CONFIG_FILE=aws.cfg python train.py` with `credential_process
    = ./x` in it made botocore run ./x as soon as the script asked for credentials (an S3 upload), and
    `GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1` let google-auth run the command an external-account key file names; and
    some libraries name their programs without the words refused so far (`CONDA_EXE=./x TORCH_INDUCTOR_INSTALL_GXX=1` made
    torch.compile run ./x on this CPU, shown by hand: 30 s; `PYTORCH_NVCC=./x`). Before: each restart ran after an accept,
    and the two cloud clients ran ./x. Now refused; `AWS_PROFILE=default python train.py` still runs
    (`GOOGLE_APPLICATION_CREDENTIALS` is refused since the fifty-ninth round: `tests/security/test_fiftyninth_round.py`)."""
    from tests.mcp.conftest import answer
    from tests.security.test_ninth_round import _restarts, _wait_for

    r, o = tmp_path / "root", tmp_path / "outside"
    run = r / "run"
    run.mkdir(parents=True)
    o.mkdir()
    pwned = o / "PWNED"
    (run / "train.py").write_text(_CLOUD_TRAIN.format(ran=str(o / "RAN")))
    (run / "x").write_text(f"#!/bin/sh\ntouch {pwned}\necho '{{\"Version\": 1, \"AccessKeyId\": \"AKIAX\", \"SecretAccessKey\": \"y\"}}'\n")
    (run / "x").chmod(0o755)
    (run / "aws.cfg").write_text("[default]\ncredential_process = ./x\n")
    (run / "c.json").write_text(json.dumps({
        "type": "external_account", "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/x",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "token_url": "https://127.0.0.1:9/v1/token",
        "credential_source": {"executable": {"command": str(run / "x"), "timeout_millis": 5000}}}))
    lines = ["AWS_CONFIG_FILE=aws.cfg python train.py", "AWS_SHARED_CREDENTIALS_FILE=aws.cfg python train.py",
             "GOOGLE_APPLICATION_CREDENTIALS=c.json GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1 python train.py",
             "CONDA_EXE=./x TORCH_INDUCTOR_INSTALL_GXX=1 python train.py", "PYTORCH_NVCC=./x python train.py",
             "KUBECONFIG=./kube.yaml python train.py", "AWS_PROFILE=default python train.py"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_"))}
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the server inherits this process's environment: no credentials of the machine's own
    try:
        got = _restarts(Server(tmp_path, roots=[r]), run / "command.txt", lines, answer("accept"))
    finally:
        os.environ.clear()
        os.environ.update(old)
    _wait_for(o / "RAN")
    _wait_for(pwned, 5)  # a refused launch that started anyway would have run ./x by now
    assert not pwned.exists(), got
    assert all("error" in g or g.get("ran") is False for g in got[:6]), got
    assert got[6].get("ran") is True, got[6]
    assert (o / "RAN").read_text() == "ran\n"


def test_a_restart_question_says_when_the_command_sends_the_runs_credentials_to_another_host(tmp_path: Path) -> None:
    """Listed as not promised by the fourteenth round: `WANDB_BASE_URL=https://elsewhere`, `HF_ENDPOINT=...` or `HTTPS_PROXY`
    with `SSL_CERT_FILE` in front of a recorded `python train.py` make the run send its W&B key or Hugging Face token to
    another host. They load no code, and a self-hosted W&B or a cluster's proxy sets them for good reasons, so the restart
    still runs after an accept; but the question only showed them inside the command, where a person reading a long line
    for `python train.py` skims past them. Now its "Expected impact" names each, and says what they do."""
    from tests.mcp.conftest import answer
    from tests.security.test_ninth_round import _restarts, _wait_for

    r, o = tmp_path / "root", tmp_path / "outside"
    run = r / "run"
    run.mkdir(parents=True)
    o.mkdir()
    (run / "train.py").write_text(f"open({str(o / 'RAN')!r}, 'a').write('ran\\n')\n")
    person = answer("accept")
    lines = [("WANDB_BASE_URL=https://collector.example HF_ENDPOINT=https://hub.example HTTPS_PROXY=http://proxy.example:3128 "
              "SSL_CERT_FILE=./ca.pem python train.py --lr 0.1"), "CUDA_VISIBLE_DEVICES=0 python train.py"]
    got = _restarts(Server(tmp_path, roots=[r]), run / "command.txt", lines, person)
    _wait_for(o / "RAN")
    assert [g.get("ran") for g in got] == [True, True], got
    impact = [next(x for x in q.splitlines() if x.startswith("Expected impact:")) for q in person.shown]
    for name in ("WANDB_BASE_URL", "HF_ENDPOINT", "HTTPS_PROXY", "SSL_CERT_FILE"):
        assert name in impact[0], impact[0]
    assert "credentials" in impact[0] and "credentials" not in impact[1], impact


def test_the_audit_log_never_keeps_a_url_password_a_refusal_quoted_past_its_cut(tmp_path: Path) -> None:
    """Promise 3: every string of an audit entry is redacted. The entry's detail (a refusal, quoting the path it was given)
    was cut to 2,000 characters before the log redacted it: a `command_file` whose path held `?src=https://u:PW@host/...`
    with the `@` past the cut left `https://u:PW` in the detail, no URL to the redactor, and the password (or its first
    characters) stood in the audit log. The MCP error, redacted whole, never showed it. Now redacted, then cut."""
    r = tmp_path / "root"
    r.mkdir()
    password = "Secr3tPassw0rdXYZ"
    calls = []
    for pad in range(0, 200, 5):  # the cut moved across the password, wherever the test folder is
        path = f"{r}/{('a' * 200 + '/') * 9}{'b' * pad}/x?src=https://u:{password}@host.example/y/command.txt"
        calls.append(("request_action", {"action": {"kind": "restart-unchanged", "command_file": path}}))
    srv = Server(tmp_path, roots=[r])
    shown = answers(srv, calls)
    assert all(password not in s for s in shown)
    entries = srv.audit_entries()
    assert len(entries) == len(calls) and all(e["outcome"] == "invalid" for e in entries), entries
    assert any(len(e["detail"]) == 2000 for e in entries)
    for e in entries:
        assert password[:5] not in e["detail"], e["detail"][-80:]


def test_a_vertex_jobs_error_never_shows_a_url_password_cut_before_its_host(tmp_path: Path) -> None:
    """Promise 3 (and section 9: names and facts are cut after redaction). A Vertex AI pipeline's error message was cut to
    300 characters for the report's "Pipeline error:" line before anything redacted it: a message quoting
    `https://u:PW@host/...` with the `@` past the cut left `https://u:PW` there, no URL to the redactor, and the password (or
    its first characters) was in the CLI's text and JSON. Served by the Vertex fake to the real client library; now each
    message is redacted before it is cut."""
    from ml_skills.collectors import gcp

    from tests.fakes.vertex_api import PROJECT, REGION, VertexFake, pipeline, task

    password = "Secr3tPassw0rdXYZ"
    with VertexFake() as f:
        env = {**os.environ, gcp.VERTEX_ENV: f.endpoint, gcp.LOGGING_ENV: f.endpoint, gcp.TIMEOUT_ENV: "2"}
        for n in (240, 246):  # the password across the cut at 300
            jid = f"train-pipeline-20261203{n:06d}"
            msg = "x " * (n // 2) + f"fetch https://u:{password}@data.example/train.csv failed"
            f.add_pipeline(pipeline(jid, "PIPELINE_STATE_FAILED", [task(2, "train", "FAILED", start=1, end=3, error=(9, msg))],
                                    error=(9, msg), end=4))
            for fmt in ("text", "json"):
                p = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--vertex-pipeline", jid, "--project",
                                    PROJECT, "--region", REGION, "--format", fmt], capture_output=True, text=True, env=env,
                                   timeout=120, cwd=tmp_path, check=False)
                assert password[:6] not in p.stdout + p.stderr, (n, fmt)
                assert "https://u:[REDACTE" in p.stdout, p.stdout[:2000] + p.stderr


def test_an_mlflow_runs_note_never_shows_a_url_password_cut_before_its_host(tmp_path: Path) -> None:
    """Section 9 says tracker facts are cut after redaction (eighth round). An MLflow run's note (`mlflow.note.content`, the
    description a person writes in the UI) and its source name were cut to 200 characters first: a note quoting
    `https://u:PW@host` with the `@` past the cut left `https://u:PW` in the fact, no URL to the redactor, and
    `get_mlflow_run` returned the password's first characters. A real MLflow sqlite store read through the real client."""
    password = "Secr3tPassw0rdXYZ"
    notes = ["x" * n + f" data from https://u:{password}@store.example/x" for n in (165, 172)]  # the cut at 200 in the password
    store = tmp_path / "mlflow.db"
    uri = f"sqlite:///{store}"
    code = ("import mlflow, sys\nmlflow.set_tracking_uri(" + repr(uri) + ")\n"
            "for note in sys.argv[1:]:\n"
            "    with mlflow.start_run() as run:\n"
            "        mlflow.set_tag('mlflow.note.content', note)\n"
            "        mlflow.log_metric('loss', 1.0)\n"
            "        print(run.info.run_id)\n")
    done = subprocess.run([sys.executable, "-c", code, *notes], cwd=tmp_path, check=True, timeout=300, capture_output=True, text=True,
                          env={**os.environ, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"})
    ids = done.stdout.split()[-len(notes):]
    os.environ["MLFLOW_TRACKING_URI"] = uri
    try:
        shown = answers(Server(tmp_path, roots=[tmp_path]), [("get_mlflow_run", {"run_id": i}) for i in ids])
    finally:
        del os.environ["MLFLOW_TRACKING_URI"]
    assert all("note" in s for s in shown), shown[0][:2000]
    for s in shown:
        assert password[:4] not in s, s[:3000]


def test_a_structured_log_payload_is_redacted_before_it_is_cut(fake, tmp_path: Path) -> None:  # noqa: F811
    """A Cloud Logging entry whose structured payload has no message field is shown as its JSON, cut to 4,000
    characters: the cut came before redaction, so a database URL whose '@host' fell past it kept the start of its
    password in `describe_vertex_job`'s answer."""
    jid = load(fake, "upstream")
    password = "Zq8Wm3Rt6Yp1Ns4Kd7Lv"
    head = '{"a": "'
    dsn = f"postgresql://trainer:{password}@db.internal:5432/features"
    filler = "x" * (MAX_TEXT - 10 - len(head) - len('", "dsn": "postgresql://trainer:'))  # the password straddles the cut
    entry = log_entry(jid, "ERROR", "", 9, task_name="build-features")
    entry["jsonPayload"] = {"a": filler, "dsn": dsn}
    fake.log_entries.append(entry)
    is_error, body, structured = _call(Server(tmp_path), "describe_vertex_job", {"job": jid, "project": PROJECT, "region": REGION})
    assert not is_error, body[:500]
    seen = body + json.dumps(structured)
    assert "xxxxxxxxxx" in seen  # the payload itself was shown
    assert password[:6] not in seen
