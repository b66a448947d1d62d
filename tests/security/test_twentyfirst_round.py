"""Issue 14's twenty-first round: attacks from outside on secret layouts of ML configuration tools (Hydra's overrides, a
name that goes on after its keyword), on resume pointers as Megatron reads them, and on link loops a run folder can hold.

Each test is one family of attacks that broke a claim of docs/security.md, driven through a real MCP client over stdio or the
CLI in a child process, with real files; each failed on the code before its fix (see docs/security.md, "Twenty-first round").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, text
from tests.security.test_ninth_round import _repoints, _safetensors

pytestmark = pytest.mark.slow  # real child processes and servers

SECRETS = [f"Zq8vLm3Kp0Rw9xT{c}q7Hn2Bc" for c in "abcdefghijkl"]


def _calls(srv: Server, calls: list[tuple[str, dict]]) -> list[tuple[bool, str, dict]]:
    got: list[tuple[bool, str, dict]] = []

    async def go() -> None:
        async with srv.client() as c:
            for name, args in calls:
                res = await c.call_tool(name, args)
                got.append((bool(res.is_error), text(res), res.structured_content or {}))

    anyio.run(go)
    return got


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process, with this process's environment (its PYTHONPATH names the code under test)."""
    return subprocess.run([sys.executable, "-m", "ml_skills.cli", *args], check=False, capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def _secret_lines() -> list[str]:
    s = SECRETS
    return [
        # Hydra's override grammar, on the command line the run logs and in the .hydra/overrides.yaml it writes
        f"[2026-12-04 10:00:00,000][__main__][INFO] - launch: python train.py +wandb.api_key={s[0]} ++db.password={s[1]} lr=0.1",
        f"- +trainer.logger.hf_token={s[2]}",
        f"- ~auth.secret={s[3]}",
        # an OAuth redirect with the token in the URL's fragment, a PowerShell and a SQL variable
        f"redirect: https://app.example.com/callback#access_token={s[4]}&token_type=Bearer",
        f"$password = \"{s[5]}\"",
        f"SET @api_key = '{s[6]}';",
        # names that go on after their keyword (listed as kept since the thirteenth round: SECRET_KEY_BASE=X)
        f"SECRET_KEY_BASE={s[7]}",
        f"DB_PASSWORD_PROD={s[8]}",
        f"OPENAI_API_KEY_2={s[9]}",
        f"--hf-token-read {s[10]}",
        f"password1: {s[11]}",
    ]


def test_a_secret_in_a_hydra_override_a_url_fragment_or_after_its_keyword_never_leaves(tmp_path: Path) -> None:
    """Promise 3: a value next to a secret-bearing name is redacted in every common syntax. A name could start only after a
    listed separator, so Hydra's `+wandb.api_key=X`, `++db.password=X` and `~auth.secret=X` (the launch line Hydra logs, and
    each line of the `.hydra/overrides.yaml` it writes into the run folder), OAuth's `#access_token=X`, PowerShell's
    `$password = "X"` and SQL's `@api_key` kept their values in clear in `read_log_tail`, `grep_log`, `diagnose` and the CLI's
    JSON report; and a name going on after its keyword (`SECRET_KEY_BASE`, `DB_PASSWORD_PROD`, `OPENAI_API_KEY_2`) too."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    lines = _secret_lines()
    log = run / "train.log"
    log.write_text("\n".join([*lines, "step 1 loss 2.0", "step 2 loss nan", "Traceback (most recent call last):",
                              '  File "train.py", line 9, in <module>', "FloatingPointError: loss is nan", ""]))
    (run / ".hydra" / "overrides.yaml").write_text("\n".join(lines[1:3]) + "\n")
    srv = Server(tmp_path, roots=[tmp_path])
    got = _calls(srv, [("read_log_tail", {"path": str(log), "lines": 50}),
                       ("grep_log", {"path": str(log), "pattern": "=|:|\\$|@"}),
                       ("read_log_tail", {"path": str(run / ".hydra" / "overrides.yaml"), "lines": 10}),
                       ("diagnose", {"target": str(log), "detail": ["evidence", "excerpt"]})])
    for err, body, structured in got:
        shown = body + json.dumps(structured)
        assert not err, shown[:500]
        leaked = [s for s in SECRETS if s[:12] in shown]
        assert not leaked, (leaked, shown[:3000])
    proc = _cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(tmp_path / "out"), cwd=tmp_path)
    report = (tmp_path / "out" / "check-failed-run.json").read_text()
    assert proc.returncode == 0, proc.stderr
    for shown in (proc.stdout, proc.stderr, report):
        assert not [s for s in SECRETS if s[:12] in shown], shown[:3000]


@pytest.mark.parametrize("content", ["2_000", "+2000", "\u0662\u0660\u0660\u0660"], ids=["underscore", "plus", "arabic-indic"])
def test_a_megatron_pointer_read_as_megatron_reads_it_is_never_moved_off_a_valid_checkpoint_unasked(tmp_path: Path,
                                                                                                   content: str) -> None:
    """Promise 2: moving a pointer off a valid checkpoint is a rollback and asks. Megatron reads its tracker file with
    `int(text.strip())`, which takes `2_000`, `+2000` and digits of other scripts; only ASCII digits were an iteration here,
    so the pointer read as a missing file `2_000` beside it: a client that cannot ask moved it off the valid iter_0002000 as a
    safe repoint, and wrote `iter_0001000` into it, which Megatron cannot read. `list_artifacts` said a resume would fail."""
    run = tmp_path / "run"
    _safetensors(run / "iter_0002000" / "model.safetensors")
    _safetensors(run / "iter_0001000" / "model.safetensors")
    pointer = run / "latest_checkpointed_iteration.txt"
    pointer.write_text(content + "\n")
    srv = Server(tmp_path, roots=[tmp_path])
    _err, body = _repoints(srv, [(pointer, run / "iter_0001000")])[0]
    assert pointer.read_text() == content + "\n", body
    assert '"ran":false' in body.replace(" ", "") and "rollback" in body, body
    listing = _calls(srv, [("inspect_checkpoint", {"path": str(pointer)})])[0]
    assert "does not exist" not in listing[1] and '"valid":true' in listing[1].replace(" ", ""), listing[1][:2000]


def test_a_repoint_onto_a_megatron_tracker_always_writes_an_iteration(tmp_path: Path) -> None:
    """Promise 2: a repoint keeps the pointer's style. A Megatron tracker whose content was not an ASCII iteration ('²', which
    int() refuses, so the target is really missing) got a path, `iter_0001000`, which Megatron cannot read either."""
    run = tmp_path / "run"
    _safetensors(run / "iter_0001000" / "model.safetensors")
    pointer = run / "latest_checkpointed_iteration.txt"
    pointer.write_text("\u00b2\n")
    _err, body = _repoints(Server(tmp_path, roots=[tmp_path]), [(pointer, run / "iter_0001000")])[0]
    assert pointer.read_text() == "1000\n", body


def _loop(folder: Path, name: str) -> None:
    os.symlink(name + ".b", folder / name)
    os.symlink(name, folder / (name + ".b"))


def test_a_link_loop_a_pointer_or_a_manifest_names_gets_a_verdict_never_an_internal_error(tmp_path: Path) -> None:
    """Promise 9 (and 2: a request is refused clearly): a run folder can hold two links naming each other. A `latest` naming
    one made `Path.resolve` raise RuntimeError: `request_action` repoint and `list_artifacts` "failed unexpectedly
    (RuntimeError)"; a manifest.json listing one did the same to `verify_artifacts`, and the CLI's `verify-artifacts` ended in
    "internal error" (exit 3)."""
    run = tmp_path / "run"
    _safetensors(run / "ck1.safetensors")
    _loop(run, "loopa")
    (run / "latest").write_text("loopa\n")
    (run / "train.log").write_text("step 1 loss 2.0\n")
    art = tmp_path / "art"
    _safetensors(art / "model.safetensors")
    _loop(art, "weights")
    (art / "manifest.json").write_text(json.dumps({"run_id": "art", "git_sha": "a" * 40, "files": {"weights": "0" * 64}}))
    srv = Server(tmp_path, roots=[tmp_path])
    _err, body = _repoints(srv, [(run / "latest", run / "ck1.safetensors")])[0]
    assert "unexpectedly" not in body and (run / "latest").read_text() == "loopa\n", body
    got = _calls(srv, [("list_artifacts", {"path": str(run)}), ("verify_artifacts", {"path": str(art), "first_version": True})])
    for err, body, _ in got:
        assert not err and "unexpectedly" not in body, body[:2000]
    assert "loop" in got[0][1] and "loop" in got[1][1], (got[0][1][:2000], got[1][1][:2000])
    proc = _cli("verify-artifacts", str(art), "--first-version", cwd=tmp_path)
    assert proc.returncode in (0, 1) and "internal error" not in proc.stderr, proc.stderr


def test_a_restart_question_names_the_wandb_service_a_recorded_line_hands_the_key_to(tmp_path: Path) -> None:
    """Promise 2, listed as a gap until now ("a variable of another name that moves a client's host is shown only in the
    command"): `WANDB_SERVICE=3-1-unix-./svc.sock` names the wandb-core service the run's wandb connects to, and wandb 0.31
    sends it the run's settings, the W&B key among them (a Unix socket in the run folder received the key). The question's
    "Expected impact" named WANDB_BASE_URL and the like, not this one."""
    from tests.mcp.conftest import answer
    from tests.security.test_ninth_round import _restarts, _wait_for

    r, o = tmp_path / "root", tmp_path / "outside"
    run = r / "run"
    run.mkdir(parents=True)
    o.mkdir()
    (run / "train.py").write_text(f"open({str(o / 'RAN')!r}, 'a').write('ran\\n')\n")
    person = answer("accept")
    got = _restarts(Server(tmp_path, roots=[r]), run / "command.txt", ["WANDB_SERVICE=3-1-unix-./svc.sock python train.py"], person)
    _wait_for(o / "RAN")
    assert [g.get("ran") for g in got] == [True], got
    impact = next(x for x in person.shown[0].splitlines() if x.startswith("Expected impact:"))
    assert "WANDB_SERVICE" in impact and "credentials" in impact, impact


def test_a_self_hosted_wandb_key_after_wandb_login_and_a_docker_login_password_never_leave(tmp_path: Path) -> None:
    """Promise 3: a W&B key right after `wandb login` is redacted (twentieth round). W&B Server hands out keys of the form
    `local-<40 hex>`, and `wandb login local-KEY` (also with `--relogin --host URL`) kept it in clear in the tail and the CLI's
    report; so did `docker login -u U -p X`, a registry login printed by a job's setup step."""
    key = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"
    log = tmp_path / "train.log"
    log.write_text(f"+ wandb login local-{key}\n+ wandb login --relogin --host https://wandb.corp.example local-{key}\n"
                   f"+ docker login -u ci -p {SECRETS[0]} registry.corp.example\nstep 1 loss 2.0\n")
    got = _calls(Server(tmp_path, roots=[tmp_path]), [("read_log_tail", {"path": str(log), "lines": 20})])
    proc = _cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(tmp_path / "out"), cwd=tmp_path)
    for shown in (got[0][1], proc.stdout, (tmp_path / "out" / "check-failed-run.json").read_text()):
        assert key[:16] not in shown and SECRETS[0][:12] not in shown, shown[:3000]
    assert "wandb login" in got[0][1] and "docker login" in got[0][1], got[0][1][:2000]
