"""Issue 14's thirteenth round: attacks from outside beside the twelfth round's fixes (the URL password rule, the named
characters of the question, the stores' and walks' caps) and at the gaps it listed as not promised.

Each test is one attack that broke a claim of docs/security.md, or a listed gap now closed, driven through the real CLI
in a child process or a real MCP client over stdio, with real files; each failed on the code before its fix (see
docs/security.md, "Thirteenth round").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import Server
from tests.security.test_twelfth_round import _ALNUM, _HEX, _fake, _printed_and_shown

pytestmark = pytest.mark.slow  # real child processes and servers


def test_a_url_password_is_redacted_whatever_follows_its_host(tmp_path: Path) -> None:
    """Promise 3: passwords in URLs, the user and host kept. The host had to be ASCII letters, digits and `.-[]:` and end
    at a listed character, so a URL in an HTML link (`...@example.com</a>`), in markdown bold (`**...@host**`), at the end
    of a sentence (`...@host!`), before an `&`, `=`, `+` or `~`, or with a host holding `_` or a letter outside ASCII kept
    its password in clear. Before: each came back whole from the CLI (text, JSON report), `read_log_tail` and `grep_log`."""
    pws = [_fake(_ALNUM, 14) for _ in range(10)]
    lines = [f'pushed to <a href="/r">https://alice:{pws[0]}@git.example.com</a>', f"remote: **https://bob:{pws[1]}@example.org**",
             f"mirror is https://carol:{pws[2]}@mirror.example.net!", f"GET https://dave:{pws[3]}@api.example.com&page=2",
             f"db=postgresql://eve:{pws[4]}@db_primary.internal/runs", f"proxy https://frank:{pws[5]}@exämple.de/",
             f"redis://:{pws[6]}@cache~", f"url=amqp://grace:{pws[7]}@mq.example.com+tls",
             f"mirrors=https://h:{pws[8]}@a.example,https://i:{pws[9]}@b.example"]  # two in one word: the host is not taken
    shown = _printed_and_shown(tmp_path, lines)
    assert "https://alice:[REDACTED]@git.example.com" in shown[-1]  # the user and host are kept
    for pw in pws:
        for out in shown:
            assert pw not in out, (pw, out[:2000])


def test_a_sentry_dsn_a_zhipu_key_and_a_stripe_key_glued_to_a_word_never_leave(tmp_path: Path) -> None:
    """Listed as not promised in the twelfth round: a Sentry DSN's key (`https://<32 hex>@o1.ingest.sentry.io/2`) and a
    `<32 hex>.<16 letters>` key (Zhipu's), and a 40-hex OAuth token as a git remote's user (`https://TOKEN@host`); not listed, `redis-cli -a X`. And promise 3 says Stripe's keys are caught wherever they start, after a word
    character too: `STRIPE_KEYsk_live_...` and `1rk_live_...` were kept in clear. Before: each came back whole from the CLI,
    `read_log_tail` and `grep_log`."""
    dsn, zhipu, oauth, redis = _fake(_HEX, 32), _fake(_ALNUM, 16), _fake(_HEX, 40), _fake(_ALNUM, 16)
    stripe = [f"sk_live_{_fake(_ALNUM, 24)}", f"rk_live_{_fake(_ALNUM, 24)}"]
    lines = [f"sentry_sdk.init(dsn='https://{dsn}@o450123.ingest.sentry.io/5501234')", f"ZHIPUAI {_fake(_HEX, 32)}.{zhipu}",
             f"env STRIPE_KEY{stripe[0]}", f"keys: 1{stripe[1]}", f"git remote add origin https://{oauth}@github.com/org/repo.git",
             f"redis-cli -h cache -p 6379 -a {redis} ping"]
    shown = _printed_and_shown(tmp_path, lines)
    assert "o450123.ingest.sentry.io" in shown[-1]  # the host is kept
    for s in [dsn, zhipu, oauth, redis, *stripe]:
        for out in shown:
            assert s[-12:] not in out, (s, out[:2000])


def test_a_restart_or_repoint_whose_folder_the_question_would_mask_is_refused_and_never_shows_the_secret(tmp_path: Path) -> None:
    """Promise 2 (the person approves exactly that action; what is shown is what runs) and promise 3 (every prompt is
    redacted). A run folder named `exp --password Sécret...` was shown masked in the restart question (`--password
    [REDACTED]`), so two folders `exp --token good` and `exp --token evil` read the same; and the question's list of
    characters outside ASCII, which quotes each word alone, named the `é` "in "Sécret..."", showing the password to the
    person and in the answer. Before: the question was asked, with the password in it. Now a restart or a repoint whose
    folder or paths the question would mask is refused, asking no one, and nothing shows the password."""
    import anyio

    from tests.mcp.conftest import answer, text
    from tests.security.test_ninth_round import _safetensors

    r = tmp_path / "root"
    pw = f"Sécret{_fake(_ALNUM, 12)}"
    run = r / f"exp --password {pw}"
    (run / "ck").mkdir(parents=True)
    (run / "train.py").write_text("print('ran')\n")
    (run / "command.txt").write_text("python train.py\n")
    _safetensors(run / "ck" / "model.safetensors")
    (r / "latest").write_text("nothing-here\n")
    person = answer("accept")
    got: list[str] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[r]).client(elicit=person) as c:
            for action in ({"kind": "restart-unchanged", "command_file": str(run / "command.txt")},
                           {"kind": "repoint-checkpoint", "pointer_file": str(r / "latest"), "checkpoint": str(run / "ck")}):
                got.append(text(await c.call_tool("request_action", {"action": action})))

    anyio.run(go)
    assert person.shown == [], person.shown  # type: ignore[attr-defined]
    assert "would show in part as [REDACTED]" in got[0] and "would show as [REDACTED]" in got[1], got
    assert (r / "latest").read_text() == "nothing-here\n"
    for out in [*got, (tmp_path / "audit.jsonl").read_text()]:
        assert pw[6:] not in out, out


def test_a_link_into_proc_dev_or_sys_gets_the_one_answer_of_any_link_out_of_the_roots(tmp_path: Path) -> None:
    """Listed as not promised ("Kernel trees are named"): a link in the roots into /proc, /dev or /sys was refused as
    "/proc/4242/environ is under /proc", naming where it leads (and, through /proc/self, the server's own pid), while a
    link to /etc or to nothing got "X is outside the allowed roots". Now every link out of the roots gets that one answer;
    a kernel path given as such is still refused as one."""
    import anyio

    from tests.mcp.conftest import text

    r = tmp_path / "root"
    r.mkdir()
    targets = ["/proc/self/environ", "/dev/zero", "/sys/kernel/notes", "/etc/hostname", "/nonexistent/x.log"]
    for i, t in enumerate(targets):
        (r / f"{i}.log").symlink_to(t)
    got: list[str] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[r]).client() as c:
            for i in range(len(targets)):
                got.append(text(await c.call_tool("read_log_tail", {"path": str(r / f"{i}.log")})).replace(f"{i}.log", "N.log"))
            got.append(text(await c.call_tool("read_log_tail", {"path": "/proc/self/environ"})))

    anyio.run(go)
    assert len(set(got[:-1])) == 1, got
    assert "under /" not in got[0] and "outside the allowed roots" in got[0], got[0]
    assert "kernel and device files are never read" in got[-1], got[-1]


def test_a_secret_assigned_through_a_subscript_never_leaves(tmp_path: Path) -> None:
    """Promise 3: a value next to a secret-bearing name, in every common syntax, assignments among them. Python's
    `os.environ["WANDB_API_KEY"] = "X"` (a notebook's first cell, a traceback's source line) and `config['hub_token'] = 'X'`
    put `"]` between the name and the `=`: before, each came back whole from the CLI, `read_log_tail` and `grep_log`."""
    values = [_fake(_ALNUM, 20) for _ in range(3)]
    lines = [f'    os.environ["WANDB_API_KEY"] = "{values[0]}"', f"config['hub_token'] = '{values[1]}'",
             f'env["DB_PASSWORD"]="{values[2]}"']
    shown = _printed_and_shown(tmp_path, lines)
    for v in values:
        for out in shown:
            assert v not in out, (v, out[:2000])


def test_an_error_naming_a_missing_path_never_folds_a_url_out_of_its_redaction(tmp_path: Path) -> None:
    """Promise 3: errors are redacted. A path that names nothing was echoed as Path() spells it, which folds `//`: a W&B run
    or a log given as `runs/x?src=https://u:PW@host` came back as "nothing at .../runs/x?src=https:/u:PW@host", no longer a
    URL to the redactor, and the password was in the error (and the CLI's one-line error). Now the path is echoed as given."""
    import anyio

    from tests.mcp.conftest import text

    r = tmp_path / "root"
    r.mkdir()
    pw = _fake(_ALNUM, 16)
    given = f"runs/x?src=https://alice:{pw}@host.example/y"
    got: list[str] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[r]).client() as c:
            for tool, arg in (("get_wandb_run", "run"), ("read_log_tail", "path"), ("list_artifacts", "path")):
                got.append(text(await c.call_tool(tool, {arg: given})))

    anyio.run(go)
    assert all("nothing at" in g for g in got), got
    for out in got:
        assert pw not in out, out
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", f"{r}/{given}", "--out-dir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ), check=False)
    assert proc.returncode != 0 and pw not in proc.stdout + proc.stderr, proc.stderr


def test_a_restart_question_shows_a_folder_whose_path_reads_like_a_key_line(tmp_path: Path) -> None:
    """Promise 2: what is shown is what runs. A folder path of 24 to 76 base64 characters with upper and lower case and a
    digit (`/tmp/Q1a2b3c4dZ/runs/GPT2/exp1`) was redacted alone as a PEM key's body line, and the restart question read
    `in "[REDACTED]"`: the person was asked to approve a run in a folder they could not see. Now the folder is shown, and
    the person who sees it accepts; the script runs."""
    import secrets as _secrets
    import shutil

    import anyio
    from mcp import types

    from tests.mcp.conftest import text
    from tests.security.test_ninth_round import _wait_for

    top = Path(f"/tmp/Q{_secrets.token_hex(4)}Z")
    run = top / "runs" / "GPT2" / "exp1"
    run.mkdir(parents=True)
    try:
        (run / "train.py").write_text(f"open({str(tmp_path / 'RAN')!r}, 'w').write('ran')\n")
        (run / "command.txt").write_text("python train.py\n")
        shown: list[str] = []

        async def person(ctx: object, params: types.ElicitRequestParams) -> types.ElicitResult:
            shown.append(params.message)
            ok = f'in "{run}"' in params.message
            return types.ElicitResult(action="accept", content={"approve": True}) if ok else types.ElicitResult(action="decline")

        got: list[str] = []

        async def go() -> None:
            async with Server(tmp_path, roots=[top]).client(elicit=person) as c:
                got.append(text(await c.call_tool("request_action", {"action": {"kind": "restart-unchanged",
                                                                                  "command_file": str(run / "command.txt")}})))

        anyio.run(go)
        assert shown and f'in "{run}"' in shown[0], (shown, got)
        _wait_for(tmp_path / "RAN")
        assert (tmp_path / "RAN").exists(), got
    finally:
        shutil.rmtree(top, ignore_errors=True)
