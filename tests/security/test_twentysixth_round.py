"""Issue 14's twenty-sixth round: attacks from outside on the code new since the twenty-fifth (the sealed request state
passed by the last redaction pass, the recovery plan's ordering, DeepSpeed's skipped steps, the Ultralytics results row,
the closing timer, batch 36's signatures and counters).

Each test is one family of attacks that broke a claim of docs/security.md, driven through a real MCP stdio client or the
CLI in a child process with real files; each failed on the code before its fix (see docs/security.md, "Twenty-sixth round").
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, text
from tests.security.childcli import cli_seconds, no_slower_than

pytestmark = pytest.mark.slow  # real child processes

_HF = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
_GH = "ghp_" + "A1b2C3d4" * 4 + "e5F6"


def test_a_key_named_like_the_sealed_request_state_never_carries_a_secret_out(tmp_path: Path) -> None:
    """Promise 3: every secret shape is redacted in every channel. The last redaction pass leaves the MCP SDK's sealed
    `requestState` as it is (an approval's round trip; 82f91c3), but it left every dict key named `request_state` or
    `requestState` anywhere in a result: a check-failed-run.json planted in a run folder with such keys, read by
    `read_report`, handed a Hugging Face token and a GitHub token in clear in the structured content (the form Claude Code
    hands its model), at the top and nested. Only an `input_required` result's own field is passed now."""
    run = tmp_path / "run"
    run.mkdir()
    report = {"schema_version": 1, "primary_cause": {"requestState": _HF, "x": "y"}, "request_state": _HF,
              "requestState": f"token {_GH}", "fixes": [{"request_state": {"requestState": _GH}}],
              "wire": {"resultType": "input_required", "requestState": _HF}}
    (run / "check-failed-run.json").write_text(json.dumps(report))
    srv = Server(tmp_path, roots=[tmp_path])
    fields = ["request_state", "requestState", "primary_cause", "fixes", "wire", "primary_cause.requestState"]

    async def go() -> list[str]:
        async with srv.client() as c:
            r = await c.call_tool("read_report", {"path": str(run / "check-failed-run.json"), "fields": fields})
            return [text(r), json.dumps(r.structured_content)]

    said = anyio.run(go)
    assert '"fields"' in said[1], said
    for out in said:
        assert _HF not in out and _GH not in out, out


def _log(tmp_path: Path, name: str, text: str) -> Path:
    log = tmp_path / name / "train.log"
    log.parent.mkdir()
    log.write_text(text)
    return log


def test_tail_lines_of_digits_never_slow_the_cli(tmp_path: Path) -> None:
    """Promise 9: time linear in the input. The run's last progress line is searched for from the tail's end back
    (analyse/lastprogress._PROGRESS), and a tqdm bar was one alternative of that pattern, r"\\d+%\\|.*\\|\\s*\\d+/\\d+": every
    digit of a run started a percentage read to the run's end, so a tail line of 2,000 digits cost 16 ms, and 500 such lines
    after the last step held the CLI 8.8 s against 1.7 s for the same lines of letters ('1%|1%|...' lines, each '.*' read to
    the line's end and back: 12.5 s against 3.3 s). The bar is now two searches, its percentage only from a run's first
    digit (lastprogress.is_progress): the same lines match as before on random strings."""
    from ml_skills.engine.analyse import lastprogress

    head = "".join(f"step {i} loss: {1 / i:.4f}\n" for i in range(1, 50))
    control = _log(tmp_path, "control", head + "".join("a" * (1990 + i % 10) + "\n" for i in range(500)))
    log = _log(tmp_path, "run", head + "".join("7" * (1990 + i % 10) + "\n" for i in range(500)))
    _, base = cli_seconds(control, tmp_path)
    proc, took = cli_seconds(log, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["run_status"]
    assert no_slower_than(took, base), (took, base)
    old = re.compile(r"(?i)(\b(step|iter|iteration|epoch|batch|train|test|eval|val)\b\s*(?:[:=#]\s*)?(?:\[\s*)?\d+|"
                     r"\d+%\|.*\|\s*\d+/\d+|\[\s*\d+/\d+\])")
    rng = random.Random(26)
    alphabet = ["1", "7", "0", "%", "|", "%|", "1%|", " ", "\t", "/", "[", "]", "step", "Epoch", ":", "=", "#", "a", "\r",
                "10/10", "val", "\xa0", "\uff11", "\u0663", "\u2588"]
    for _ in range(20_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert lastprogress.is_progress(s) == bool(old.search(s)), repr(s)


def test_an_out_of_memory_message_whose_sizes_are_no_numbers_gets_a_verdict(tmp_path: Path) -> None:
    """Promise 9: a hostile file gets a verdict, never a crash. The plan reads PyTorch's out-of-memory message for how
    much memory is reserved but unallocated (plan/applies: 'X GiB already allocated ... Y GiB reserved in total', 'X GiB
    is allocated by PyTorch, and Y MiB is reserved'), each size a run of digits and dots, and float() raised on '1.2.3'
    and '..': the CLI ended in 'internal error: ValueError', exit 3. Such a size now says nothing about fragmentation."""
    from tests.security.childcli import cli

    lines = [("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity; 1.2.3 GiB already "
             "allocated; 0 bytes free; 14.5.6 GiB reserved in total by PyTorch)"),
             ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of "
             "which 5.0 MiB is free. Of the allocated memory .. GiB is allocated by PyTorch, and 1.2.3 MiB is reserved by "
             "PyTorch but unallocated.")]
    for i, line in enumerate(lines):
        log = _log(tmp_path, f"run{i}", f"step 1 loss: 0.5\n{line}\n")
        proc = cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(tmp_path / f"out{i}"), cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
        assert json.loads(proc.stdout)["primary_cause"] == "oom"
