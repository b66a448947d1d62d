"""Issue 14's seventh round: attacks from outside on promises the first six rounds did not try.

Each test is one attack that broke a claim of docs/security.md, driven through the real CLI in a child
process. Each failed on the code before its fix (see docs/security.md, "Seventh round").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


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
