"""Issue 14's twenty-seventh round: attacks from outside on the code new since the twenty-sixth (the catalog's `narrows` and
`before_progress`, the kills a log explains, the first failing rank on its symptom-only path, MXNet's and an RL loop's
counters, the excerpt read from the scan's tail), on a run folder whose files change during a diagnosis, Unicode confusables
in tokens and NUL-padded logs, and on the engine's patterns with a fuzzer whose fillers are Unicode spaces and digits.

Each test is one family of attacks that broke a claim of docs/security.md, driven through a real MCP stdio client or the
CLI in a child process with real files; each failed on the code before its fix (see docs/security.md, "Twenty-seventh round").
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, text
from tests.security.childcli import cli

pytestmark = pytest.mark.slow  # real child processes

_SECRETS = ("Qw9rTy7uIo5pAs3dFg1hJk", "abcdef0123456789abcdef0123456789", "hunter2hunter2XyZ", "Zx8cVb7nMq6wEr5tYu4i")


def test_a_secret_assigned_after_a_secret_name_given_as_a_value_never_leaves(tmp_path: Path) -> None:
    """Promise 3: every secret shape is redacted in every channel. A name and its value (`password = X`) printed as the
    value of another secret-bearing name (`password: password = X`, `api_token: api_key = X`, a config's echo of an
    assignment; with ASCII spaces, no-break or ideographic spaces around the operator) kept X in clear: the assignment rule
    took the inner name for the outer name's value, masked it, and the rest was never looked at again, in the CLI's JSON
    and report, `read_log_tail` and `grep_log`. A value that is itself a secret's name and its operator is no value now;
    the inner name's own match masks X."""
    run = tmp_path / "run"
    run.mkdir()
    log = run / "train.log"
    lines = [f"step {i} loss: {1 / i:.4f}" for i in range(1, 20)]
    lines += [f"password: password = {_SECRETS[0]}", f"api_token: api_key = {_SECRETS[1]}",
              f"config: token\u00a0=\u00a0{_SECRETS[1]}x", f"db_password: password\u3000:\u3000{_SECRETS[2]}",
              f"token: secret_key => {_SECRETS[3]}", f"auth_token: hf_token: {_SECRETS[0]}y"]
    lines += ["Traceback (most recent call last):", '  File "t.py", line 1, in <module>',
              "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    proc = cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(out), cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [proc.stdout, proc.stderr, (out / "check-failed-run.json").read_text()]
    srv = Server(tmp_path, roots=[tmp_path])

    async def go() -> list[str]:
        async with srv.client() as c:
            tail = await c.call_tool("read_log_tail", {"path": str(log), "lines": 50})
            grep = await c.call_tool("grep_log", {"path": str(log), "pattern": "=|:"})
            return [text(tail), json.dumps(tail.structured_content), text(grep), json.dumps(grep.structured_content)]

    said += anyio.run(go)
    assert "password: password = [REDACTED]" in said[3], said[3]
    for out_text in said:
        for secret in _SECRETS:
            assert secret not in out_text, (secret, out_text[-3000:])


def test_lines_of_unicode_spaces_above_a_traceback_never_slow_the_cli(tmp_path: Path) -> None:
    """Promise 9: time linear in the input. The probes read the frames printed above the decisive line (up to 80 lines
    above it, and down to its traceback) with plan/probes/choose._FRAME, r'^\\W*(?:\\[rank\\d+\\]:\\s*)?\\s*File ...': `\\W*` and
    `\\s*` both take a line's leading whitespace, so every split of it was tried, 23 ms for a line of 2,000 ideographic or
    no-break spaces (11 ms for ASCII spaces). 155 such lines around an out-of-memory error held the CLI 3.3-3.5 s against
    0.4 s for the same lines of letters (8-9x). Each run is read by one quantifier now: the same matches and groups as the
    old pattern on random strings of its parts and of Unicode spaces."""
    import random
    import re
    import time

    from ml_skills.engine.plan.probes import choose

    head = "".join(f"step {i} loss: {1 / i:.4f}\n" for i in range(1, 50))
    oom = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"

    def log(name: str, ch: str) -> Path:
        lines = lambda k: "".join(ch * (2000 - i % 10) + "x\n" for i in range(k))
        path = tmp_path / name / "train.log"
        path.parent.mkdir()
        path.write_text(head + lines(79) + oom + lines(75) + 'Traceback (most recent call last):\n  File "t.py", line 1, in '
                        "<module>\n" + oom)
        return path

    def fastest(path: Path) -> float:
        took = []
        for _ in range(2):
            t = time.monotonic()
            proc = cli("check-failed-run", str(path), "--format", "json", "--out-dir", str(tmp_path / "out"), cwd=tmp_path,
                       timeout=120)
            took.append(time.monotonic() - t)
            assert proc.returncode == 0, proc.stderr[-2000:]
            assert json.loads(proc.stdout)["primary_cause"] == "oom"
        return min(took)

    control, hostile = fastest(log("letters", "a")), fastest(log("spaces", "\u3000"))
    assert hostile < 3 * control, (hostile, control)
    old = re.compile(r'^\W*(?:\[rank\d+\]:\s*)?\s*File "([^"\n]{1,300})", line (\d{1,7}), in ([\w.<>]{1,120})')
    rng = random.Random(27)
    parts = [" ", "\t", "\u3000", "\xa0", "[", "]", ":", "rank", "0", "7", "[rank0]:", "[rank12]: ", 'File "a.py", line 3, in f',
             "File ", '"', "x", ">", "|", "-", "\n", "\u0663", 'File "b", line 1, in <module>', ", line ", "in ", "."]
    for _ in range(30_000):
        s = "".join(rng.choice(parts) for _ in range(rng.randint(0, 14)))
        a, b = old.match(s), choose._FRAME.match(s)
        assert (a is None) == (b is None) and (a is None or (a.span(), a.groups()) == (b.span(), b.groups())), repr(s)


def test_checkpoint_folders_removed_during_a_diagnosis_never_end_it(tmp_path: Path) -> None:
    """Promise 9: one bad file never turns the answer into "internal error". A run folder diagnosed while its trainer
    rotates checkpoints (removes the oldest, writes the next) lists a checkpoint folder that is gone when it is inspected:
    the walk's first open (os.fwalk) and the folder's stat raised FileNotFoundError, and the CLI ended in "internal error:
    FileNotFoundError" (exit 3) in 3 runs of 5, `list_artifacts` in "could not read its input" in 2 of 5, `diagnose` once
    (folders removed and written again); with folders renamed away and back, as here, in nearly every run.
    A folder gone between its check and its walk is now gone, as a missing one is (paths.walk), and a checkpoint folder
    removed while it is read is an invalid checkpoint saying so."""
    import struct
    import subprocess
    import sys

    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("".join(f"step {i} loss: {1 / i:.4f}\n" for i in range(1, 300))
                                   + "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    weights = struct.pack("<Q", len(header)) + header + b"\0" * 8
    for k in range(150):
        (run / f"checkpoint-{k * 10}").mkdir()
        (run / f"checkpoint-{k * 10}" / "model.safetensors").write_bytes(weights)
        for j in range(30):
            (run / f"checkpoint-{k * 10}" / f"rng_state_{j}.txt").write_text("0")
    # the folders go and come back, fast, in a process of their own: half of them are gone at any time
    rotate = ("import os, sys\nwhile True:\n"
              "    for k in range(150): os.rename(f'{sys.argv[1]}/checkpoint-{k * 10}', f'{sys.argv[1]}/.gone-{k}')\n"
              "    for k in range(150): os.rename(f'{sys.argv[1]}/.gone-{k}', f'{sys.argv[1]}/checkpoint-{k * 10}')\n")
    rotating = subprocess.Popen([sys.executable, "-c", rotate, str(run)])
    srv = Server(tmp_path, roots=[tmp_path])

    async def go() -> list[str]:
        async with srv.client() as c:
            return [text(r) for r in [await c.call_tool("list_artifacts", {"path": str(run)}) for _ in range(6)]
                    if r.is_error]

    try:
        for _ in range(4):
            proc = cli("check-failed-run", str(run), "--format", "json", "--out-dir", str(tmp_path / "out"), cwd=tmp_path,
                       timeout=120)
            assert proc.returncode == 0, proc.stderr[-2000:]
            assert json.loads(proc.stdout)["primary_cause"] == "oom"
        errors = anyio.run(go)
    finally:
        rotating.kill()
        rotating.wait()
    assert errors == [], errors
