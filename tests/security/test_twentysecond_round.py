"""Issue 14's twenty-second round: attacks from outside on the time a hostile log costs the engine's line readings (a run
of blank lines under Keras bars, closing lines padded with spaces), and on secret layouts of real tools no round had
tried (an Authorization header with no scheme, the Azure CLI's login, Windows' setx, R's assignment, a token as a URL's
user before a password).

Each test is one family of attacks that broke a claim of docs/security.md, driven through a real MCP client over stdio or the
CLI in a child process, with real files; each failed on the code before its fix (see docs/security.md, "Twenty-second round").
"""

from __future__ import annotations

import random
import string
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mcp.conftest import Server, timed_calls

pytestmark = pytest.mark.slow  # real child processes and servers

SECRETS = [f"Zq8vLm3Kp0Rw9xT{c}q7Hn2Bc" for c in "abcdefgh"]
HEX_TOKEN = "3f2a9c1b7d4e8f6a0b5c2d9e1f7a3b8c4d6e0f2a"


def _cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process, with this process's environment (its PYTHONPATH names the code under test)."""
    return subprocess.run([sys.executable, "-m", "ml_skills.cli", *args], check=False, capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)



def _keras_under_blank_lines(path: Path, bars: int) -> None:
    """A Keras run's bars with no epoch header above them, under a run of 60,000 blank lines (270 KB for 3,000 bars)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n" * 60_000 + "".join(f"{i}/{bars} [==============================] - 0s 1ms/step - loss: {1 / (i + 1):.4f}\n"
                                           for i in range(1, bars + 1)))


def test_a_run_of_blank_lines_under_keras_bars_never_holds_the_cli_or_scan_log(tmp_path: Path) -> None:
    """Promise 9: a hostile file gets a verdict in bounded time. Each Keras bar line looked for its epoch header in the 64 KiB
    above it with `(?m)^\\s*Epoch`, whose `\\s*` runs across newlines: from each of 60,000 blank lines to the end of the run,
    5 s a bar line. A 270 KB log of 3,000 bars held the CLI for hours, and `scan_log` past its 30 s deadline (the regex held
    the interpreter, so the server's own deadline could not answer: no answer in 120 s)."""
    log = tmp_path / "run" / "train.log"
    _keras_under_blank_lines(log, 3000)
    t = time.monotonic()
    try:
        proc = _cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(tmp_path / "out"), cwd=tmp_path, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("check-failed-run on a 270 KB log of Keras bars under blank lines ran past 90 s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.monotonic() - t < 60
    srv = Server(tmp_path, roots=[tmp_path])
    try:
        got = timed_calls(srv, [("scan_log", {"path": str(log)}), ("diagnose", {"target": str(log)})], limit=60)
    except TimeoutError:
        pytest.fail("scan_log or diagnose gave no answer within 60 s")
    for err, body, took in got:
        assert not err and took < 40, (took, body[:500])


def _closing_lines(path: Path, filler: str) -> None:
    """199 training lines, then 2,100 closing lines ('process done', 'finish training', 'train success') padded to 2,000
    characters (a tail line's cut) by `filler`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"step {i} loss {1 / (i + 1):.4f}" for i in range(1, 200)]
    lines += [f"{w} {filler}x" for w in ("process done", "finish training", "train success") for _ in range(700)]
    path.write_text("\n".join(lines) + "\n")


def test_closing_lines_padded_with_spaces_never_hold_the_diagnosis(tmp_path: Path) -> None:
    """Promise 9: bounded time. The run-summary reading matched `process done\\s*[.!]*\\s*$` on every line of the tail;
    on a line of 'process done' and 2,000 spaces (a tail line's cut) it tried every split of the spaces: 65 ms a line, 32 s
    for the default 500-line tail of a 1 MB log, minutes at `--last 2000`, and `diagnose` ran out of its 30 s deadline. The
    same lines padded with letters cost about 1 ms each; spaces now cost a few times that."""
    rng = random.Random(7)
    control, hostile = tmp_path / "control" / "train.log", tmp_path / "hostile" / "train.log"
    _closing_lines(control, "".join(rng.choice(string.ascii_lowercase + " ") for _ in range(1985)))
    _closing_lines(hostile, " " * 1985)
    took = {}
    for log in (control, hostile):
        t = time.monotonic()
        try:
            proc = _cli("check-failed-run", str(log), "--last", "2000", "--format", "json", "--out-dir", str(log.parent / "out"),
                        cwd=tmp_path, timeout=150)
        except subprocess.TimeoutExpired:
            pytest.fail(f"check-failed-run --last 2000 on {log.parent.name} closing lines ran past 150 s")
        assert proc.returncode == 0, proc.stderr[-2000:]
        took[log] = time.monotonic() - t
    assert took[hostile] < 4 * took[control] + 10, took
    srv = Server(tmp_path, roots=[tmp_path])
    err, body, _ = timed_calls(srv, [("diagnose", {"target": str(hostile)})], limit=60)[0]
    assert not err, body[:500]


def _secret_lines() -> list[str]:
    s = SECRETS
    return [
        # an API that takes its key as the whole Authorization header (AssemblyAI, Pexels), as a client prints its headers
        f"request headers: {{'Authorization': '{s[0]}', 'Content-Type': 'application/json'}}",
        f"> Authorization: {s[1]}",
        # the Azure CLI's service-principal login, as a CI job's `set -x` prints it expanded
        f"+ az login --service-principal -u 0f1e2d3c-app -p {s[2]} --tenant contoso.onmicrosoft.com",
        # Windows' setx, R's assignment and its Sys.setenv beside it
        f"C:\\run> setx WANDB_API_KEY {s[3]}",
        f"db_password <- '{s[4]}'",
        f"hf_token <- \"{s[5]}\"",
        # GitHub's token as the URL's user before x-oauth-basic, as git prints a remote
        f"remote: https://{HEX_TOKEN}:x-oauth-basic@github.com/acme/train.git",
    ]


def test_an_authorization_key_an_az_login_setx_rs_assignment_and_a_token_user_never_leave(tmp_path: Path) -> None:
    """Promise 3: Authorization headers, and values next to a secret-bearing name in every common syntax. A header holding
    the key with no scheme (`Authorization: KEY`), `az login ... -p X`, `setx NAME X`, R's `password <- 'X'` (the `<-` was
    masked as a `.netrc` password and the value kept) and a 40-hex token as a URL's user before a password (GitHub's
    `TOKEN:x-oauth-basic@`) stood in clear in `read_log_tail`, `grep_log`, `diagnose` and the CLI's JSON report."""
    run = tmp_path / "run"
    run.mkdir()
    lines = _secret_lines()
    log = run / "train.log"
    log.write_text("\n".join([*lines, "step 1 loss 2.0", "step 2 loss nan", "Traceback (most recent call last):",
                              '  File "train.py", line 9, in <module>', "FloatingPointError: loss is nan", ""]))
    srv = Server(tmp_path, roots=[tmp_path])
    got = timed_calls(srv, [("read_log_tail", {"path": str(log), "lines": 50}),
                             ("grep_log", {"path": str(log), "pattern": "uthoriz|login|setx|<-|://"}),
                             ("diagnose", {"target": str(log), "detail": ["evidence", "excerpt"]})], limit=120)
    needles = [s[:12] for s in SECRETS] + [HEX_TOKEN[:12]]
    for err, shown, _ in got:
        assert not err, shown[:500]
        assert not [n for n in needles if n in shown], shown[:3000]
    proc = _cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(tmp_path / "out"), cwd=tmp_path)
    report = (tmp_path / "out" / "check-failed-run.json").read_text()
    assert proc.returncode == 0, proc.stderr
    for shown in (proc.stdout, proc.stderr, report):
        assert not [n for n in needles if n in shown], shown[:3000]
