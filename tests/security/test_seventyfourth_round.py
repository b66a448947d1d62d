"""Issue 14's seventy-fourth round: an outside tester (a helper session that did not write this code) on promises 1, 2, 3,
4 and 5b; each break failed on the code before its fix (docs/security.md, "Seventy-fourth round").

HTML character references were decoded only as written with their `;` and by a few names: HTML5 and `html.unescape` also
read a numeric reference with no `;` (`&#103hp_...`, `password&#61X`) and HTML5's own names (`ghp&UnderBar;...`), and the
token came back whole in every channel (log tools, the report, a process's command line in the approval question, folder
names, a refused restart's error).
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from ml_skills.safety.redact import redact

from tests.conftest import run_cli
from tests.security.test_any_channel import _mcp_channels, _real_run

BODY = "vHFWHzbogFU1cfsImSlk4R06rl5jj6XW4HD7"  # a GitHub token's 36 letters and digits
SPELLINGS = {"no-semicolon": f"&#103hp_{BODY}", "hex-no-semicolon": f"&#x67hp_{BODY}", "html5-name": f"ghp&UnderBar;{BODY}",
             "invisible-html5-name": f"ghp_{BODY[:10]}&it;{BODY[10:]}", "assignment": "password&#61XsecretVal9"}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_an_html5_spelling_of_a_secret_is_read_as_html_unescape_reads_it(name: str) -> None:
    spelled = SPELLINGS[name]
    assert redact(html.unescape(spelled)) != html.unescape(spelled)  # what a reader decodes is a secret the rules mask
    shown = redact(spelled)
    assert BODY[4:20] not in shown and "secretVal9" not in shown, shown


@pytest.mark.slow
def test_html5_spellings_of_a_token_are_redacted_in_every_channel(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lines = [f"push with {s}" for s in SPELLINGS.values()]
    log = _real_run(run_dir, lines, SPELLINGS["html5-name"])
    cli = run_cli("check-failed-run", str(log), "--out-dir", str(tmp_path / "out"))
    shown = [*_mcp_channels(tmp_path, run_dir, log), cli.stdout, cli.stderr, (tmp_path / "out" / "check-failed-run.json").read_text()]
    leaks = [i for i, out in enumerate(shown) if BODY[4:20] in out or "secretVal9" in out]
    assert not leaks, [shown[i][:300] for i in leaks]


@pytest.mark.parametrize("content", ['"ckpt-200"\n', '{"checkpoint": "ckpt-200"}\n', "['ckpt-200']\n"])
def test_a_pointer_holding_a_quoted_or_structured_value_is_never_rewritten(tmp_path: Path, content: str) -> None:
    """A `latest` pointer written with json.dump named a valid checkpoint; read as a file named with its quotes it was
    'missing', so a client that cannot ask the person moved it to an older checkpoint, in plain text its reader cannot parse."""
    import numpy as np
    from safetensors.numpy import save_file

    from tests.mcp.conftest import Server, call_once

    run = tmp_path / "run"
    for step in (100, 200):
        (run / f"ckpt-{step}").mkdir(parents=True)
        save_file({"w": np.ones((4, 4), dtype=np.float32)}, str(run / f"ckpt-{step}" / "model.safetensors"))
    (run / "latest").write_text(content)
    err, shown, _ = call_once(Server(tmp_path, roots=[tmp_path]), "request_action", {
        "action": {"kind": "repoint-checkpoint", "pointer_file": str(run / "latest"), "checkpoint": str(run / "ckpt-100")}})
    assert (run / "latest").read_text() == content, shown
    assert err and "quoted or structured value" in shown, shown


@pytest.mark.slow
def test_triage_of_a_folder_holding_a_wandb_run_leaves_nothing_in_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seventy-fourth round: each triage_runs call (and the CLI's triage-runs) over a folder holding a W&B run left two
    folders in TMPDIR (`tmp*wandb-media`, `tmp*wandb-artifacts`: `import wandb` makes them, and a pool worker leaves
    through os._exit, past the atexit handler that removes them)."""
    import os
    import subprocess
    import sys

    from tests.mcp.conftest import ROOT, Server, call_once

    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    env = {**os.environ, "WANDB_DIR": str(run), "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
    subprocess.run([sys.executable, "-m", "tests.collectors.wandb_offline", "healthy"], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=300)
    (run / "train.log").write_text("".join(f"step {i} loss {2 - i / 100:.3f}\n" for i in range(50)))
    for other in ("r2", "r3"):  # more runs than one, so the triage takes a pool of worker processes
        (tmp_path / "runs" / other).mkdir()
        (tmp_path / "runs" / other / "train.log").write_text((run / "train.log").read_text())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    err, shown, _ = call_once(Server(tmp_path, roots=[tmp_path]), "triage_runs", {"targets": [str(tmp_path / "runs")], "workers": 2})
    assert not err, shown[:500]
    cli = run_cli("triage-runs", str(tmp_path / "runs"), "--workers", "2", cwd=tmp_path)
    assert cli.returncode in (0, 1), cli.stderr[-500:]
    assert sorted(os.listdir(scratch)) == [], sorted(os.listdir(scratch))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_process_that_execs_another_program_while_the_person_reads_is_not_signalled(tmp_path: Path, mode: str) -> None:
    """Seventy-fourth round: a 'python' process named in the kill-worker question exec'd `sleep` (the same pid and start
    time) 2 s later; the person accepted at 4 s and the other program got the SIGTERM (the mid-call elicitation; on the
    2026-07-28 protocol the request is prepared again after the answer, and the changed name asks the person again)."""
    import subprocess
    import sys
    import time

    import anyio
    from mcp import types

    from tests.mcp.conftest import Server, text

    victim = subprocess.Popen([sys.executable, "-c", "import os, time; time.sleep(2); os.execvp('sleep', ['sleep', '60'])"])
    shown: list[str] = []

    async def slow_person(ctx: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.append(params.message)
        await anyio.sleep(4)  # the person reads the question; the process execs meanwhile
        if '"python' not in params.message:  # asked again about the program it became: not what the person meant
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"approve": True})

    got: list[str] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[tmp_path]).client(elicit=slow_person, mode=mode) as c:
            r = await c.call_tool("request_action", {"action": {"kind": "kill-worker", "pid": victim.pid, "signal": "TERM"}})
            got.append(text(r) + str(r.structured_content))

    try:
        anyio.run(go)
        time.sleep(1)
        assert shown and '"python' in shown[0], shown
        assert victim.poll() is None, got  # the program it became was not signalled
        assert "another program" in got[0] or mode == "auto", got  # auto: the person is asked again, about `sleep`
    finally:
        victim.kill()
        victim.wait()


def test_a_refused_calls_huge_arguments_are_cut_in_the_audit_log(tmp_path: Path) -> None:
    """Seventy-fourth round (a gap): a refused request_action's arguments were stored whole, one 1,000,059-character entry,
    so a client could grow the audit log without limit."""
    import json

    from tests.mcp.conftest import Server, call_once

    srv = Server(tmp_path, roots=[tmp_path])
    err, _shown, _ = call_once(srv, "request_action", {"action": {"kind": "kill-worker", "pid": 1, "signal": "TERM", "note": "x" * 1_000_000}})
    entries = srv.audit.read_text().splitlines()
    assert entries and max(len(e) for e in entries) < 10_000, [len(e) for e in entries]
    assert err and any("characters of arguments" in json.loads(e)["arguments"].get("cut", "") for e in entries), entries[:1]


def test_classify_action_judges_a_path_target_as_request_action_does(tmp_path: Path) -> None:
    """Seventy-fourth round (a gap): a policy rule on `R/prod/*` made classify_action say 'safe' for the same pointer spelled
    with `//`, `/./`, a link alias or a relative path, while request_action (which resolves the path) asked the person."""
    from tests.mcp.conftest import Server, answers

    r = tmp_path / "R"
    (r / "prod" / "run").mkdir(parents=True)
    (r / "prod" / "run" / "latest").write_text("ckpt-9\n")
    (r / "alias").symlink_to(r / "prod")
    policy = tmp_path / "policy.toml"
    policy.write_text(f'version = 1\nallow_dangerous = []\n[[overrides]]\naction = "repoint-checkpoint"\ntarget = "{r}/prod/*"\n'
                      'risk = "needs-approval"\n')
    spellings = [f"{r}/prod/run/latest", f"{r}//prod/run/latest", f"{r}/./prod/run/latest", f"{r}/alias/run/latest", "prod/run/latest"]
    got = answers(Server(tmp_path, roots=[r], extra=("--policy", str(policy))),
                  [("classify_action", {"action": "repoint-checkpoint", "target": t}) for t in spellings])
    assert all('"risk": "needs-approval"' in g for g in got), got
