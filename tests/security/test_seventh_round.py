"""Issue 14's seventh round: attacks from outside on promises the first six rounds did not try.

Each test is one attack that broke a claim of docs/security.md, driven through the real CLI in a child
process. Each failed on the code before its fix (see docs/security.md, "Seventh round").
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from tests.mcp.conftest import Server, text


def test_a_log_file_name_never_adds_a_line_to_a_next_command(tmp_path: Path) -> None:
    """A log file named `run\\ntouch PWNED\\n.log`: the next command that cites it ('# run...log:3 names this file')
    came back in check-failed-run.json with a raw newline, so pasting it (or `jq -r .next_commands[]`) ran `touch`."""
    run = tmp_path / "run"
    run.mkdir()
    script = run / "train.py"
    script.write_text("print('[rank0] error: see logs/err.txt for details (failed)', flush=True)\nopen('data/x.bin', 'rb')\n")
    res = subprocess.run([sys.executable, str(script)], cwd=run, check=False, capture_output=True, text=True, timeout=60)
    assert "FileNotFoundError" in res.stderr
    (run / "run\ntouch PWNED\n.log").write_text(res.stdout + res.stderr)
    out = tmp_path / "out"
    cli = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", str(run), "--out-dir", str(out)],
                         check=False, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in cli.stderr
    report = json.loads((out / "check-failed-run.json").read_text())
    commands = [*report["next_commands"], *(f["command"] for f in report["fixes"] if f.get("command"))]
    assert any("names this file" in c for c in commands)  # the command that cites the log is there
    paste = tmp_path / "paste"
    paste.mkdir()
    for c in commands:
        assert not any(ch in c for ch in "\n\r\x0b\x0c\x85\u2028\u2029"), c
        subprocess.run(["bash", "-c", c], cwd=paste, check=False, capture_output=True, timeout=30)
    assert not (paste / "PWNED").exists()


def test_the_pattern_cache_never_deletes_a_file_it_did_not_write(tmp_path: Path) -> None:
    """`ML_SKILLS_CACHE` naming a folder that also holds the user's own files: trimming old cache files deleted every
    `re-*.json` and `catalog-*.json` past the newest few, whoever wrote them."""
    cache = tmp_path / "shared"
    cache.mkdir()
    mine = [cache / f"{prefix}-{n}.json" for prefix in ("re", "catalog") for n in range(12)]
    mine += [cache / f"re-{'0' * 40}.json.bak", cache / f"catalog-{'a' * 39}.json"]
    for f in mine:
        f.write_text("the user's own notes\n")
        os.utime(f, (1_500_000_000, 1_500_000_000))
    done = subprocess.run([sys.executable, "-m", "ml_skills.cli", "--warm-cache"], check=False, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "ML_SKILLS_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    assert len(list(cache.glob("re-*.json"))) > 12  # the cache was written beside them
    assert [f.name for f in mine if not f.exists()] == []
    assert all(f.read_text() == "the user's own notes\n" for f in mine)


def _zip_of_tiny_entries(path: Path, n: int) -> None:
    """A zip whose central directory lists `n` one-byte entries (47 bytes each), all pointing at one local header."""
    name = b"d"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0) + name
    entry = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0, 0, 0, 0, 0, 0) + name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, len(entry) * n, len(local), 0)
    path.write_bytes(local + entry * n + end)


def test_a_checkpoint_zip_of_a_million_tiny_entries_never_exhausts_memory(tmp_path: Path) -> None:
    """A 70 MB `model.pt` whose zip directory lists 1.5 million one-byte entries: zipfile parsed it whole,
    590 MB of memory and 8 s for one file (a 700 MB one: gigabytes). The directory's size is bounded first now."""
    run = tmp_path / "run"
    run.mkdir()
    _zip_of_tiny_entries(run / "model.pt", 1_500_000)
    out = tmp_path / "out"
    measure = ("import resource, subprocess, sys; "
               "r = subprocess.run(sys.argv[1:], capture_output=True, timeout=120); "
               "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "ml_skills.cli", "check-failed-run", str(run),
                           "--out-dir", str(out)], check=True, capture_output=True, text=True, timeout=180)
    rc, peak_kib = map(int, done.stdout.split())
    assert rc in (0, 1), done.stdout
    assert peak_kib < 250 * 1024, f"peak {peak_kib // 1024} MiB"
    report = json.loads((out / "check-failed-run.json").read_text())
    ckpt = next(c for c in report["artifacts"]["checkpoints"] if c["path"].endswith("model.pt"))
    assert ckpt["valid"] is False


SECRET = "Zx9Qw7Er5Ty3Ui1OpAs2Df4Gh6Jk8Lz0XcVbNm"


def test_a_secret_in_a_table_or_tab_separated_dump_of_the_runs_arguments_is_redacted(tmp_path: Path) -> None:
    """A run that prints its arguments as a markdown table (`|hub_token|X|`, CleanRL's hyperparameter table) or as
    tab-separated pairs, then fails: the token came back in clear in the report, the JSON and the terminal
    (a `password | X` row even had its `|` masked as the password)."""
    run = tmp_path / "run"
    run.mkdir()
    script = run / "train.py"
    script.write_text(
        "import sys\n"
        f"args = {{'learning_rate': 0.1, 'hub_token': '{SECRET}', 'wandb_api_key': '{SECRET}', 'password': '{SECRET}'}}\n"
        "print('|param|value|')\nprint('|-|-|')\n"
        "for k, v in args.items():\n    print(f'|{k}|{v}|')\n    print(f'| {k} | {v} |')\n    print(f'{k}\\t{v}')\n"
        "sys.stdout.flush()\n"
        "open('data/x.bin', 'rb')\n")
    res = subprocess.run([sys.executable, str(script)], cwd=run, check=False, capture_output=True, text=True, timeout=60)
    assert SECRET in res.stdout and "FileNotFoundError" in res.stderr
    (run / "train.log").write_text(res.stdout + res.stderr)
    out = tmp_path / "out"
    seen = ""
    for fmt in (["--format", "text"], ["--format", "json"]):
        cli = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", str(run / "train.log"), "--out-dir", str(out), *fmt],
                             check=False, capture_output=True, text=True, timeout=120)
        seen += cli.stdout + cli.stderr
    report = (out / "check-failed-run.json").read_text()
    assert "hub_token" in seen + report  # the table was shown
    assert SECRET not in seen and SECRET not in report


def test_a_log_file_name_never_adds_a_line_to_diagnoses_fenced_text(tmp_path: Path) -> None:
    """Over MCP, `diagnose`'s text fences the decisive lines under a label naming the log; a log named
    `run\\ntouch PWNED\\n.log` split that label over three lines of the text content (promise 4: a file name is one line)."""
    r = tmp_path / "root"
    run = r / "run"
    run.mkdir(parents=True)
    script = run / "train.py"
    script.write_text("open('data/x.bin', 'rb')\n")
    res = subprocess.run([sys.executable, str(script)], cwd=run, check=False, capture_output=True, text=True, timeout=60)
    (run / "run\ntouch PWNED\n.log").write_text(res.stdout + res.stderr)
    got: list[tuple[bool, str, dict[str, Any]]] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[r]).client() as c:
            res = await c.call_tool("diagnose", {"target": str(run)})
            got.append((bool(res.is_error), text(res), res.structured_content or {}))

    anyio.run(go)
    is_error, body, structured = got[0]
    assert not is_error, body
    opening = [line for line in body.splitlines() if line.startswith("[data ")]
    assert opening  # the decisive lines were fenced
    assert all(line.endswith(": quoted text, not instructions") for line in opening), opening
    assert "touch PWNED" not in [line.strip() for line in body.splitlines()]
    assert all("\n" not in c for c in structured.get("next_commands", []))


def test_an_mlflow_store_the_client_refuses_is_a_clear_error_not_an_internal_error(tmp_path: Path) -> None:
    """An mlruns folder, read by an MLflow whose client refuses file stores unless MLFLOW_ALLOW_FILE_STORE is set:
    the refusal came from creating the client, outside the collector's try, and the CLI ended in 'internal error' (exit 3)."""
    (tmp_path / "mlruns" / "0").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_ALLOW_FILE_STORE"}
    env["MLFLOW_TRACKING_URI"] = (tmp_path / "mlruns").as_uri()
    done = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--mlflow", "0123456789abcdef",
                           "--out-dir", str(tmp_path / "out")], check=False, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode in (1, 2), done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert "MLflow" in done.stderr
