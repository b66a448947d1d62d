"""Issue 14's eleventh round: attacks from outside beside the tenth round's fixes (the restart's variables, redaction of
the kinds docs/security.md lists) and at the gaps it listed.

Each test is one attack that broke a claim of docs/security.md, driven through the real CLI in a child process or a real
MCP client over stdio, with real files; each failed on the code before its fix (see docs/security.md, "Eleventh round").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Server, text

pytestmark = pytest.mark.slow  # real child processes and servers

_GIT = "/usr/bin/git"


@pytest.mark.skipif(not os.access(_GIT, os.X_OK), reason="needs git for GitPython to start")
def test_a_recorded_command_never_names_a_program_a_library_the_script_imports_will_start(tmp_path: Path) -> None:
    """`GIT_PYTHON_GIT_EXECUTABLE=./x python train.py` reads as a launch with a git setting, and train.py is harmless:
    it imports GitPython, as `wandb.init` and MLflow's run tagging do. GitPython runs that program (`x version`) as it is
    imported. Before: after the accept ./x ran; the tenth round refused OpenSSL's and plugin variables, not the programs
    a library starts. Now refused, with git's other variables, CUDA's injection library and gcc's program folder
    (COMPILER_PATH=. runs ./cc1plus when torch.compile builds a kernel); `OMP_NUM_THREADS=1` still runs."""
    pytest.importorskip("git")
    from tests.mcp.conftest import answer
    from tests.security.test_ninth_round import _restarts, _wait_for

    r, o = tmp_path / "root", tmp_path / "outside"
    run = r / "run"
    run.mkdir(parents=True)
    o.mkdir()
    pwned = o / "PWNED"
    (run / "x").write_text(f"#!/bin/sh\necho ran >> {pwned}\nexec {_GIT} \"$@\"\n")
    (run / "x").chmod(0o755)
    (run / "train.py").write_text(f"import git\nopen({str(o / 'REAL')!r}, 'a').write('ran\\n')\n")
    subprocess.run([sys.executable, "train.py"], cwd=run, env={**os.environ, "GIT_PYTHON_GIT_EXECUTABLE": "./x"}, check=True,
                   timeout=60)
    assert pwned.exists()  # control: the planted program is live
    pwned.unlink()
    (o / "REAL").unlink()
    lines = ["GIT_PYTHON_GIT_EXECUTABLE=./x python train.py", "GIT_SSH_COMMAND=./x python train.py",
             "CUDA_INJECTION64_PATH=./x python train.py", "COMPILER_PATH=. python train.py",
             "OMP_NUM_THREADS=1 python train.py"]
    got = _restarts(Server(tmp_path, roots=[r]), run / "command.txt", lines, answer("accept"))
    _wait_for(o / "REAL")
    time.sleep(1)  # a refused launch that started anyway would have written its marker by now
    assert not pwned.exists(), (pwned.read_text(), got)
    assert all("error" in g or g.get("ran") is False for g in got[:4]), got
    assert got[4].get("ran") is True, got[4]


def _fake(alphabet: str, n: int) -> str:
    import secrets

    return "".join(secrets.choice(alphabet) for _ in range(n))


def _cli(run: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", str(run), "--out-dir", str(out),
                           "--format", "json"], capture_output=True, text=True, timeout=180, env=dict(os.environ), check=False)


def _shown_over_mcp(tmp_path: Path, root: Path, log: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Each call's text and structured answer from a real MCP stdio client."""
    srv = Server(tmp_path, roots=[root])
    shown: list[str] = []

    async def go() -> None:
        async with srv.client() as c:
            for tool, args in calls:
                res = await c.call_tool(tool, {"path": str(log), **args})
                shown.append(text(res) + json.dumps(res.structured_content))

    anyio.run(go)
    return shown


def test_a_service_account_key_id_printed_by_python_and_a_key_printed_by_a_rank_never_leave(tmp_path: Path) -> None:
    """docs/security.md lists a GCP service-account JSON's `private_key_id` and PEM private keys "whole or line by line"
    as redacted. A script that loads its service account and prints it (`print(info)`) writes Python's repr,
    `'private_key_id': 'X'`, not JSON; a key printed line by line from a rank under torchrun has `[rank0]: ` before each
    line (mpirun --tag-output: `[1,0]<stdout>:`). Before: the key id came back in clear from the CLI (text and JSON report)
    and every MCP log tool, and a body line from a window or a grep that does not reach the key's BEGIN line."""
    alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    key_id = _fake("0123456789abcdef", 40)
    body = [_fake(alnum, 62) + "Aa1" for _ in range(12)]
    info = {"type": "service_account", "project_id": "p", "private_key_id": key_id, "client_email": "t@p.iam.gserviceaccount.com"}
    lines = [f"loaded credentials {info}", f"private_key_id: {key_id}", "[rank0]: -----BEGIN PRIVATE KEY-----",
             *(f"[rank0]: {b}" for b in body[:6]), *(f"[1,0]<stdout>:{b}" for b in body[6:]),
             "[rank0]: -----END PRIVATE KEY-----", *(f"step {i} loss nan" for i in range(3)), "FloatingPointError: loss is nan"]
    root = tmp_path / "root"
    run = root / "run"
    run.mkdir(parents=True)
    with (run / "train.log").open("w") as f:
        subprocess.run([sys.executable, "-c", "import sys; print('\\n'.join(sys.argv[1:]))", *lines], stdout=f, check=True, timeout=60)
    proc = _cli(run, tmp_path / "out")
    shown = [proc.stdout, proc.stderr, (tmp_path / "out" / "check-failed-run.json").read_text()]
    shown += _shown_over_mcp(tmp_path, root, run / "train.log", [
        ("read_log_tail", {}), ("grep_log", {"pattern": "private_key_id|" + body[4][:20] + "|" + body[9][:20], "context": 0}),
        ("read_log_window", {"line": 10, "before": 0, "after": 2})])
    assert all("[REDACTED]" in s for s in shown[-3:]), shown[-3:]
    for secret in (key_id, *body):
        for s in shown:
            assert secret[-20:] not in s, (secret, s[:1500])


def _reader_of(expected: str) -> Any:
    """A person who accepts a restart whose question reads as `expected` and names nothing else to look at, and declines
    any other: records what they were shown."""
    from mcp import types

    shown: list[str] = []

    async def cb(ctx: Any, params: Any) -> types.ElicitResult:
        shown.append(params.message)
        reads_as = params.message.replace("\ua78f", ".").replace("\u1427", ".").replace("\u0323", "")
        ok = f'"{expected}"' in reads_as and "outside ASCII" not in params.message
        return types.ElicitResult(action="accept", content={"approve": True}) if ok else types.ElicitResult(action="decline")

    cb.shown = shown  # type: ignore[attr-defined]
    return cb


def test_a_restart_question_names_a_letter_that_reads_as_a_dot_or_a_mark_that_reads_as_nothing(tmp_path: Path) -> None:
    """`python train<U+A78F>py` (LATIN LETTER SINOLOGICAL DOT), `python train<U+1427>py` (CANADIAN SYLLABICS FINAL MIDDLE
    DOT) and `python train.py<U+0323>` (COMBINING DOT BELOW) read as `python train.py`; files of those names sit in the
    run folder beside the real train.py. They are letters and marks of names people use, so the tenth round listed them as
    not promised. A person who reads the question as the ordinary launch accepts. Before: the look-alike file ran. Now
    the question names each character outside ASCII with its code, so it no longer reads as train.py; `python train.py`
    itself still reads so, and runs."""
    from tests.security.test_ninth_round import _restarts, _wait_for

    r, o = tmp_path / "root", tmp_path / "outside"
    run = r / "run"
    run.mkdir(parents=True)
    o.mkdir()
    (run / "train.py").write_text(f"import sys\nopen({str(o / 'REAL')!r}, 'a').write(sys.argv[0] + '\\n')\n")
    odd = ["train\ua78fpy", "train\u1427py", "train.py\u0323"]
    for name in odd:
        (run / name).write_text(f"open({str(o / 'PWNED')!r}, 'a').write({name!r} + '\\n')\n")
    person = _reader_of("python train.py")
    got = _restarts(Server(tmp_path, roots=[r]), run / "command.txt", [*(f"python {n}" for n in odd), "python train.py"], person)
    _wait_for(o / "REAL")
    time.sleep(1)  # a look-alike launched after an accept would have written its marker by now
    assert not (o / "PWNED").exists(), ((o / "PWNED").read_text(), got)
    assert all(g.get("ran") is not True for g in got[:3]), got
    assert got[3].get("ran") is True, got[3]
    assert (o / "REAL").read_text() == "train.py\n"
    for code in ("U+A78F", "U+1427", "U+0323"):
        assert any(code in q for q in person.shown), person.shown  # type: ignore[attr-defined]


def test_a_recorded_command_never_moves_a_code_cache_by_a_variable_that_does_not_name_it(tmp_path: Path) -> None:
    """`TMPDIR=. python train.py` and `USER=bob python train.py` move torch inductor's kernel cache
    (`$TMPDIR/torchinductor_$USER`, whose compiled kernels load when the script uses torch.compile) into the run folder or
    another user's folder; `XDG_CACHE_HOME=.` moves the Hub's remote-code modules. The line does not say so, so the tenth
    round's "shown to the person" left them nothing to judge by (listed as not promised). Before: each ran after an
    accept. Now refused. Since the thirty-ninth round `TORCHINDUCTOR_CACHE_DIR=./c`, which names the cache, is refused too
    (a recorded line sets only variables known to tune a run); `OMP_NUM_THREADS=1` still runs."""
    from tests.mcp.conftest import answer
    from tests.security.test_ninth_round import _restarts, _wait_for

    r, o = tmp_path / "root", tmp_path / "outside"
    run = r / "run"
    run.mkdir(parents=True)
    o.mkdir()
    (run / "train.py").write_text(f"import os\nopen({str(o / 'REAL')!r}, 'a').write(os.environ.get('TMPDIR', '-') + '\\n')\n")
    lines = ["TMPDIR=. python train.py", "USER=bob python train.py", "XDG_CACHE_HOME=. python train.py",
             "LOGNAME=bob TMP=. python train.py", "TORCHINDUCTOR_CACHE_DIR=./c python train.py", "OMP_NUM_THREADS=1 python train.py"]
    got = _restarts(Server(tmp_path, roots=[r]), run / "command.txt", lines, answer("accept"))
    _wait_for(o / "REAL")
    time.sleep(1)  # a refused launch that started anyway would have written its line by now
    assert all("error" in g or g.get("ran") is False for g in got[:5]), got
    assert got[5].get("ran") is True, got[5]
    assert (o / "REAL").read_text() == "-\n"


def test_an_mlflow_metrics_folder_is_never_listed_past_three_times_what_is_read(tmp_path: Path) -> None:
    """The tenth round read at most 10,000 of a run's metric files, but listed every name first (a Path and an lstat
    each): a million empty files in `mlruns/1/<run>/metrics` took 30 s and 222 MB of the CLI (without the store: 0.7 s).
    Now the listing stops after 30,000 names and says so: 3.3 s and 120 MB for the million (40,000 here)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("".join(f"step {i} loss {1 / (i + 1):.4f}\n" for i in range(50)))
    r = run / "mlruns" / "1" / "4f1c2a"
    (r / "metrics").mkdir(parents=True)
    (r / "meta.yaml").write_text("status: 3\nrun_name: overnight\n")
    fd = os.open(r / "metrics", os.O_RDONLY)
    try:
        for i in range(40_000):
            os.close(os.open(f"m{i}", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    finally:
        os.close(fd)
    t = time.monotonic()
    proc = _cli(run, tmp_path / "out")
    took = time.monotonic() - t
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "over 30,000 names below it, the first 30,000 looked at" in proc.stdout, proc.stdout[-3000:]
    assert took < 60, took


def _folders(top: Path, names: Any) -> None:
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY)
    try:
        for n in names:
            os.mkdir(n, dir_fd=fd)
    finally:
        os.close(fd)


def test_tens_of_thousands_of_empty_folders_never_cost_more_than_the_files_cap(tmp_path: Path) -> None:
    """The run directory's inventory stops at 20,000 files, but folders were not counted, and every `checkpoint-N` folder
    was inspected and listed in the report: 50,000 empty `checkpoint-N` folders took 28 s and a 17 MB report; 150,000
    empty run folders in `mlruns/1` took 10 to 20 s (the walk, then an lstat of each one's meta.yaml and metrics).
    Now each walk (the inventory's, the search for tracker stores) stops after 20,000 folders, the 200 checkpoint folders with the highest step numbers are inspected, and
    a store's first 10,000 run folders are looked into; each cut is named."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("".join(f"step {i} loss {1 / (i + 1):.4f}\n" for i in range(50)))
    _folders(run, (f"checkpoint-{i}" for i in range(40_000)))
    _folders(run / "cache", (f"d{i}" for i in range(25_000)))
    store = tmp_path / "run2"
    _folders(store / "mlruns" / "1", (f"r{i}" for i in range(15_000)))
    (store / "train.log").write_text((run / "train.log").read_text())
    t = time.monotonic()
    proc = _cli(run, tmp_path / "out")
    took = time.monotonic() - t
    assert "15,000 run folders, the first 10,000 looked at" in _cli(store, tmp_path / "out2").stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = (tmp_path / "out" / "check-failed-run.json").read_text()
    assert "40,000 checkpoint folders: the 200 with the highest step numbers inspected" in report, report[-3000:]
    assert "checkpoint-39999" in report and "checkpoint-100\"" not in report
    assert "over 20,000 folders under" in report
    assert "tracker stores were looked for in the first 20,000" in proc.stdout
    assert len(report) < 2_000_000, len(report)
    assert took < 60, took


def test_pypi_replicate_grafana_shopify_tokens_and_ssh_hmac_kaggle_storage_keys_never_leave(tmp_path: Path) -> None:
    """Token kinds with distinctive prefixes outside the listed ones (a PyPI upload token, `pypi-AgEIcHlwaS5vcmc...`;
    Replicate `r8_`; Grafana Cloud `glc_`; Shopify `shpat_`) and keys named by a qualifier outside the list (`ssh_key`,
    `hmac_key`, `KAGGLE_KEY`, `AZURE_STORAGE_KEY`), printed into a run's log as `twine`, `.pypirc` and launch scripts
    echo them. Before: every one came back in clear from the CLI (text and JSON report) and from `read_log_tail`."""
    alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    tokens = [f"pypi-AgEIcHlwaS5vcmc{_fake(alnum, 120)}", f"r8_{_fake(alnum, 37)}", f"glc_{_fake(alnum, 80)}==",
              f"shpat_{_fake('0123456789abcdef', 32)}", f"Sk{_fake(alnum, 30)}", f"Hm{_fake(alnum, 30)}", _fake("0123456789abcdef", 32),
              f"{_fake(alnum, 60)}=="]
    lines = [f"twine upload -u __token__ -p{tokens[0]} dist/*", f"export REPLICATE_API_TOKEN_{tokens[1]}",
             f"grafana push {tokens[2]}", f"shopify token {tokens[3]}", f"ssh_key={tokens[4]}", f"hmac_key: {tokens[5]}",
             f"KAGGLE_KEY={tokens[6]}", f"AZURE_STORAGE_KEY={tokens[7]}", "step 1 loss nan", "FloatingPointError: loss is nan"]
    root = tmp_path / "root"
    run = root / "run"
    run.mkdir(parents=True)
    with (run / "train.log").open("w") as f:
        subprocess.run([sys.executable, "-c", "import sys; print('\\n'.join(sys.argv[1:]))", *lines], stdout=f, check=True, timeout=60)
    proc = _cli(run, tmp_path / "out")
    shown = [proc.stdout, proc.stderr, (tmp_path / "out" / "check-failed-run.json").read_text()]
    shown += _shown_over_mcp(tmp_path, root, run / "train.log", [("read_log_tail", {})])
    assert "[REDACTED]" in shown[-1]
    for t in tokens:
        for s in shown:
            assert t[-16:] not in s, (t, s[:1500])
