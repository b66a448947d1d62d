"""Issue 14's twelfth round: attacks from outside beside the eleventh round's fixes (the restart's refused variables,
redaction of the kinds docs/security.md lists, the stores' caps) and at the gaps it listed as not promised.

Each test is one attack that broke a claim of docs/security.md, or a listed gap now closed, driven through the real CLI
in a child process or a real MCP client over stdio, with real files; each failed on the code before its fix (see
docs/security.md, "Twelfth round").
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import Server
from tests.security.test_eleventh_round import _cli, _shown_over_mcp

pytestmark = pytest.mark.slow  # real child processes and servers

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdef"


def _fake(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _printed_and_shown(tmp_path: Path, lines: list[str]) -> list[str]:
    """`lines` printed by a real process into a failed run's log, then what the CLI (text, stderr, JSON report) and a real
    MCP client (`read_log_tail`, `grep_log`) show of it."""
    root = tmp_path / "root"
    run = root / "run"
    run.mkdir(parents=True)
    with (run / "train.log").open("w") as f:
        subprocess.run([sys.executable, "-c", "import sys; print('\\n'.join(sys.argv[1:]))", *lines, "step 1 loss nan",
                        "FloatingPointError: loss is nan"], stdout=f, check=True, timeout=60)
    proc = _cli(run, tmp_path / "out")
    shown = [proc.stdout, proc.stderr, (tmp_path / "out" / "check-failed-run.json").read_text()]
    return shown + _shown_over_mcp(tmp_path, root, run / "train.log", [("read_log_tail", {}), ("grep_log", {"pattern": "."})])


def test_sendgrid_discord_telegram_cookie_docker_kaggle_aws_and_command_line_passwords_never_leave(tmp_path: Path) -> None:
    """The eleventh round listed as not promised: SendGrid keys, Discord webhook and Telegram bot tokens in their URLs, a
    `Cookie:` / `Set-Cookie:` header, a Docker config's `"auth"`, kaggle.json's `"key"`, `sshpass -p X`, `mysql -pX` and
    `curl -u user:X`, as a run's alerting hook, a `requests` debug dump and a launch script print them, and an AWS secret with
    no name beside it but right after its key id (the console's credentials CSV), and a URL's password after a user of over
    200 characters (a token as the user). Before: each came back in clear from the
    CLI (text, JSON report), `read_log_tail` and `grep_log`."""
    b64 = _ALNUM + "+/"
    secrets_ = [f"SG.{_fake(_ALNUM, 22)}.{_fake(_ALNUM, 43)}", _fake(_ALNUM + "_-", 68), f"AA{_fake(_ALNUM + '_-', 33)}",
                _fake(_ALNUM, 32), _fake(_ALNUM, 40), f"{_fake(b64, 38)}==", _fake(_HEX, 32), _fake(_ALNUM, 14), _fake(_ALNUM, 14),
                _fake(_ALNUM, 14), f"Ab1{_fake(b64, 37)}", _fake(_ALNUM, 20)]
    lines = [f"alerts: sendgrid {secrets_[0]}", f"POST https://discord.com/api/webhooks/1234567890123456789/{secrets_[1]}",
             f"GET https://api.telegram.org/bot7012345678:{secrets_[2]}/sendMessage", f"send: b'Cookie: sessionid={secrets_[3]}'",
             f"reply: 'Set-Cookie: session={secrets_[4]}; Path=/; HttpOnly'",
             '{"auths": {"https://index.docker.io/v1/": {"auth": "' + secrets_[5] + '"}}}',
             '{"username": "alice", "key": "' + secrets_[6] + '"}', f"sshpass -p {secrets_[7]} ssh node1 nvidia-smi",
             f"mysql -h db -uroot -p{secrets_[8]} runs", f"curl -u admin:{secrets_[9]} https://registry/api",
             f"alice,,AKIA{_fake('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', 16)},{secrets_[10]}",
             f"git clone https://{_fake(_ALNUM, 240)}:{secrets_[11]}@git.example/x.git"]
    shown = _printed_and_shown(tmp_path, lines)
    assert "[REDACTED]" in shown[-1]
    for s in secrets_:
        for out in shown:
            assert s[-12:] not in out, (s, out[:2000])


def test_tokens_of_the_ml_services_a_run_calls_never_leave(tmp_path: Path) -> None:
    """Token formats outside the listed kinds, of services a training or evaluation run calls: LangSmith `lsv2_pt_`, Groq
    `gsk_`, xAI `xai-`, Perplexity `pplx-`, NVIDIA `nvapi-`, HashiCorp Vault `hvs.`, Pinecone `pcsk_`, Sentry `sntrys_`,
    DigitalOcean `dop_v1_`, Together `tgp_v1_`, Atlassian `ATATT3`, a GCS HMAC access id `GOOG1`, a Mailgun `key-`, and an
    Azure `Ocp-Apim-Subscription-Key:` header. Before: each came back in clear from the CLI, `read_log_tail` and `grep_log`."""
    tokens = [f"lsv2_pt_{_fake(_HEX, 32)}_{_fake(_HEX, 10)}", f"gsk_{_fake(_ALNUM, 52)}", f"xai-{_fake(_ALNUM, 80)}",
              f"pplx-{_fake(_ALNUM, 48)}", f"nvapi-{_fake(_ALNUM, 64)}", f"hvs.{_fake(_ALNUM, 95)}", f"pcsk_{_fake(_ALNUM, 6)}_{_fake(_ALNUM, 60)}",
              f"sntrys_{_fake(_ALNUM, 120)}", f"dop_v1_{_fake(_HEX, 64)}", f"tgp_v1_{_fake(_ALNUM, 43)}", f"ATATT3{_fake(_ALNUM, 180)}",
              f"GOOG1E{_fake('ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', 55)}", f"key-{_fake(_HEX, 32)}", _fake(_HEX, 32)]
    lines = [f"export LANGCHAIN_API_KEY_{tokens[0]}", f"groq client {tokens[1]}", f"xai: {tokens[2]}", f"pplx {tokens[3]}",
             f"nim endpoint token {tokens[4]}", f"vault login {tokens[5]}", f"pinecone {tokens[6]}", f"sentry auth {tokens[7]}",
             f"doctl {tokens[8]}", f"together {tokens[9]}", f"jira {tokens[10]}", f"gsutil hmac {tokens[11]}", f"mailgun {tokens[12]}",
             f"headers: Ocp-Apim-Subscription-Key: {tokens[13]}"]
    shown = _printed_and_shown(tmp_path, lines)
    for t in tokens:
        for out in shown:
            assert t[-12:] not in out, (t, out[:2000])


def test_a_recorded_command_never_names_a_toolkit_or_another_runtime_a_library_starts(tmp_path: Path) -> None:
    """`CUDA_HOME=. python train.py` reads as a launch with a CUDA setting, but torch's extension builds run
    `$CUDA_HOME/bin/nvcc` (the eleventh round listed it as shown, not refused); `TRITON_HOME=.` moves Triton's kernel cache
    without naming it; `JAVA_TOOL_OPTIONS=-agentpath:./x.so` loads a library into the JVM PySpark starts; `NCCL_CONF_FILE`
    is a file of NCCL variables, its plugins among them; `NODE_OPTIONS=--require=./x.js` runs a file in any node a library
    starts. Before: each ran after an accept. Now refused; `CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=1` still runs."""
    from tests.mcp.conftest import answer
    from tests.security.test_ninth_round import _restarts, _wait_for

    r, o = tmp_path / "root", tmp_path / "outside"
    run = r / "run"
    run.mkdir(parents=True)
    o.mkdir()
    (run / "train.py").write_text(f"import os\nopen({str(o / 'RAN')!r}, 'a').write(os.environ.get('CUDA_HOME', '-') + '\\n')\n")
    lines = ["CUDA_HOME=. python train.py", "TRITON_HOME=. python train.py", "JAVA_TOOL_OPTIONS=-agentpath:./x.so python train.py",
             "NCCL_CONF_FILE=./nccl.conf python train.py", "NODE_OPTIONS=--require=./x.js python train.py", "ROCM_PATH=. python train.py",
             "CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=1 python train.py"]
    got = _restarts(Server(tmp_path, roots=[r]), run / "command.txt", lines, answer("accept"))
    _wait_for(o / "RAN")
    time.sleep(1)  # a refused launch that started anyway would have written its line by now
    assert all("error" in g or g.get("ran") is False for g in got[:6]), got
    assert got[6].get("ran") is True, got[6]
    assert (o / "RAN").read_text() == "-\n"


def _experiment(folder: Path, names: int) -> None:
    """An MLflow experiment folder of `names` entries (hard links to one empty file: quick to make, listed like folders)."""
    import os

    folder.mkdir(parents=True)
    (folder.parent / f".{folder.name}").write_text("")
    for i in range(names):
        os.link(folder.parent / f".{folder.name}", folder / f"{i:032x}")


def test_an_mlflow_store_of_many_experiments_is_never_listed_past_its_cap_in_all(tmp_path: Path) -> None:
    """The eleventh round capped what is listed of an MLflow store at 30,000 names per folder, and said a store's first
    10,000 run folders are looked at; but every experiment was listed to that cap: 300 experiments of 1,000 run folders
    (300,000 folders) were all listed and made Paths before the cut (1 s of the CLI's 3-5 s, growing with experiments).
    Measured as the least CPU time of three reads, a store of six experiments of 30,000 names against one of them: before,
    about 6 times; now the listing stops at 30,000 names in all, and the cut is named."""
    from ml_skills.collectors import runstores

    many, one = tmp_path / "many" / "mlruns", tmp_path / "one" / "mlruns"
    for e in range(6):
        _experiment(many / str(e), 30_000)
    _experiment(one / "0", 30_000)

    def cpu(store: Path) -> float:
        best = 1e9
        for _ in range(3):
            t0 = time.process_time()
            runstores._mlflow_runs(store, [])
            best = min(best, time.process_time() - t0)
        return best

    assert cpu(many) < 2.5 * cpu(one) + 0.005
    notes: list[str] = []
    runstores._mlflow_runs(many, notes)
    assert any("over 30,000 names in its experiments" in n for n in notes), notes


def test_a_restart_question_names_a_look_alike_character_whatever_else_the_folder_holds(tmp_path: Path) -> None:
    """The eleventh round's question named the characters outside ASCII, but only the first 8 (then "and 1 more"), each
    once, in the first word holding it. A run folder named `expériences_données_çàüöñøß` (eight accented letters) left
    U+A78F LATIN LETTER SINOLOGICAL DOT in `python train꞉py` unnamed; a folder `a꞉b` named it in the folder only. A person
    who reads the question as `python train.py`, and accepts when no character is named in the script's word, accepted;
    before: the look-alike file ran, twice. Now every character is named in every word holding it, and a question that
    would name over 40 is refused; the real train.py, run from the accented folder, still runs."""
    import anyio
    from mcp import types

    from tests.mcp.conftest import text

    r, o = tmp_path / "root", tmp_path / "outside"
    o.mkdir()
    odd = "train\ua78fpy"
    folders = [r / "expériences_données_çàüöñøß" / "run", r / "a\ua78fb" / "run", r / ("".join(chr(0x4E00 + i) for i in range(41))) / "run"]
    for run in folders:
        run.mkdir(parents=True)
        (run / "train.py").write_text(f"open({str(o / 'REAL')!r}, 'a').write('real\\n')\n")
        (run / odd).write_text(f"open({str(o / 'PWNED')!r}, 'a').write('pwned\\n')\n")
        (run / "command.txt").write_text(f"python {odd}\n")
    shown: list[str] = []

    async def person(ctx: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.append(params.message)
        named_in_script = f'in "{odd}"' in params.message
        ok = '"python train.py"' in params.message.replace("\ua78f", ".") and not named_in_script
        return types.ElicitResult(action="accept", content={"approve": True}) if ok else types.ElicitResult(action="decline")

    got: list[str] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[r]).client(elicit=person) as c:
            for run in [*folders, folders[0]]:
                if run == folders[0] and got:
                    (run / "command.txt").write_text("python train.py\n")
                res = await c.call_tool("request_action", {"action": {"kind": "restart-unchanged", "command_file": str(run / "command.txt")}})
                got.append(text(res))

    anyio.run(go)
    from tests.security.test_ninth_round import _wait_for

    _wait_for(o / "REAL")
    time.sleep(1)  # a look-alike launched after an accept would have written its marker by now
    assert not (o / "PWNED").exists(), (got, shown)
    assert "more than the question can name" in got[2], got[2]
    assert (o / "REAL").read_text() == "real\n", got
    assert all(f'U+A78F LATIN LETTER SINOLOGICAL DOT in "{odd}"' in q for q in shown[:2]), shown


def test_a_repoint_never_shows_a_pointers_url_password_cut_before_its_host(tmp_path: Path) -> None:
    """A `latest` pointer naming a remote checkpoint by a URL with a password (`https://user:PW@host/ckpt`), the `@` past
    the 200th character. A rollback to a valid local checkpoint: the question's "How to undo", the answer's `undo` and
    `detail`, and the audit log quoted the old content cut at 200 characters, then redacted: cut before its `@host`, the
    password no longer matched the URL rule. Before: the password was in all four. Now each is redacted, then cut."""
    import anyio
    import torch
    from safetensors.torch import save_file

    from tests.mcp.conftest import answer, text

    run = tmp_path / "root" / "run"
    (run / "ckpt-1").mkdir(parents=True)
    save_file({"w": torch.zeros(4)}, str(run / "ckpt-1" / "model.safetensors"))
    pw = f"Pw{_fake(_ALNUM, 18)}"
    old = "https://" + "u" * 171 + ":" + pw + "@host.example/ckpt/step-9"
    assert old.index("@") == 200
    (run / "latest").write_text(old + "\n")
    srv = Server(tmp_path, roots=[tmp_path / "root"])
    person = answer("accept")
    got: list[str] = []

    async def go() -> None:
        async with srv.client(elicit=person) as c:
            res = await c.call_tool("request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": str(run / "latest"),
                                                                   "checkpoint": str(run / "ckpt-1")}})
            got.append(text(res))

    anyio.run(go)
    assert (run / "latest").read_text().strip() == "ckpt-1", got  # it ran, after the accept
    shown = [*person.shown, *got, srv.audit.read_text()]  # type: ignore[attr-defined]
    for out in shown:
        assert pw not in out, out
    assert "[REDACTED]" in person.shown[0]  # type: ignore[attr-defined]


def test_a_latest_pointer_never_shows_its_url_password_cut_before_its_host(tmp_path: Path) -> None:
    """The same pointer, read by a diagnosis: the run directory's `latest` holds `https://user:PW@host/ckpt` with its `@` past
    the 200th character. The inventory's `latest_pointer` and the pointer's checkpoint `reason` ("points to ...") were cut
    at 200 characters, then redacted with the model. Before: the password was in the CLI's text and JSON report and in
    check-failed-run.json, and in `list_artifacts`. Now each is redacted, then cut."""
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True)
    (run / "train.log").write_text("step 1 loss 2.3\nstep 2 loss nan\nFloatingPointError: loss is nan\n")
    pw = f"Pw{_fake(_ALNUM, 18)}"
    (run / "latest").write_text("https://" + "u" * 171 + ":" + pw + "@host.example/ckpt/step-9\n")
    proc = _cli(run, tmp_path / "out")
    text_report = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", str(run), "--out-dir", str(tmp_path / "o2")],
                                 capture_output=True, text=True, timeout=180, check=False)
    shown = [proc.stdout, proc.stderr, (tmp_path / "out" / "check-failed-run.json").read_text(), text_report.stdout]
    shown += _shown_over_mcp(tmp_path, tmp_path / "root", run, [("list_artifacts", {})])
    assert "points to" in shown[0] and "[REDACTED]@host" in shown[0], shown[0][:3000]
    for out in shown:
        assert pw not in out, out[:3000]


def _nested(top: Path, depth: int) -> None:
    """`top/d/d/.../d` `depth` folders deep, made through held fds (the path is far past PATH_MAX), a log at the bottom."""
    import os

    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        sub = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = sub
    os.close(os.open("x.log", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)


def _remove_nested(top: Path) -> None:
    """Undo _nested without recursion (pytest's own clean-up of tmp_path recurses once per level and fails at exit)."""
    import os

    fds = [os.open(top, os.O_RDONLY)]
    while True:
        try:
            fds.append(os.open("d", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        except FileNotFoundError:
            break
    os.unlink("x.log", dir_fd=fds[-1])
    os.close(fds.pop())
    while fds:
        os.rmdir("d", dir_fd=fds[-1])
        os.close(fds.pop())


@pytest.fixture
def nested_cleanup() -> Any:
    made: list[Path] = []
    yield made
    for top in made:
        _remove_nested(top)


def test_a_folder_nested_thousands_deep_never_ends_verify_artifacts_or_preflight(tmp_path: Path, nested_cleanup: list[Path]) -> None:
    """A run folder holding a folder nested 3,000 deep (made with mkdirat, past PATH_MAX). `verify-artifacts` lists the run's
    files with `paths.walk` (os.fwalk, which recurses once per level); `preflight-run --data --results-archive` walked the
    data and the archive with `Path.rglob` (recursive too), and a repoint's prepare counted its target's files so. Before:
    "internal error: RecursionError", exit 3, from both CLI commands, and a repoint to it refused as "could not be prepared
    (RecursionError)". Now every walk goes through `paths.walk` and stops at 100 levels: the checks report, and the
    repoint is refused as not a valid checkpoint."""
    run = tmp_path / "root" / "run"
    (run / "train.log").parent.mkdir(parents=True)
    (run / "train.log").write_text("step 1 loss 2.3\n")
    _nested(run / "deep", 3000)
    nested_cleanup.append(run / "deep")
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "verify-artifacts", str(run)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)  # its report lands in the working directory
    assert proc.returncode in (0, 1), (proc.returncode, proc.stderr[-2000:])
    assert "internal error" not in proc.stderr and "[FAIL] weights" in proc.stdout, proc.stdout[-2000:]
    shown = _shown_over_mcp(tmp_path, tmp_path / "root", run, [("verify_artifacts", {})])
    assert "unexpectedly" not in shown[0] and "weights" in shown[0], shown[0][:2000]
    (run / "train.py").write_text("print(1)\n")
    pre = subprocess.run([sys.executable, "-m", "ml_skills.cli", "preflight-run", str(run / "train.py"), "--data", str(run),
                          "--results-archive", str(run), "--out-dir", str(tmp_path / "out")], capture_output=True, text=True,
                         timeout=120, check=False)
    assert "internal error" not in pre.stderr and "input completeness" in pre.stdout and "results archive" in pre.stdout, (
        pre.returncode, pre.stderr[-2000:], pre.stdout[-2000:])
    from ml_skills.errors import PolicyError
    from ml_skills.policy.actions import RepointCheckpoint, prepare

    (run / "latest").write_text("deep\n")  # on the deep folder: leaving it asks; pointing at it is refused, clearly
    with pytest.raises(PolicyError, match="not a valid checkpoint"):
        prepare(RepointCheckpoint(kind="repoint-checkpoint", pointer_file=str(run / "latest"), checkpoint=str(run / "deep")),
                [tmp_path / "root"], tmp_path / "out")
