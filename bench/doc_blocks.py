"""Find and replace a transcript in a markdown doc, by the heading it sits under.

A transcript is either an indented block (4 spaces) whose first line starts with `$ `, or a
fenced block whose first line does; it is replaced whole with what the generator captured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _after(lines: list[str], heading: str) -> int:
    if heading not in lines:
        raise SystemExit(f"heading not found in the doc: {heading!r}")
    return lines.index(heading)


def replace_indented(text: str, heading: str, transcript: str) -> str:
    """The first indented `    $ ` block after the heading, up to the next line that is not indented."""
    lines = text.split("\n")
    start = next(i for i in range(_after(lines, heading), len(lines)) if lines[i].startswith("    $ "))
    end = start + 1
    while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
        end += 1
    while not lines[end - 1].strip():
        end -= 1
    new = ["    " + line if line.strip() else "" for line in transcript.rstrip("\n").split("\n")]
    return "\n".join(lines[:start] + new + lines[end:])


def replace_fenced(text: str, heading: str, transcript: str, nth: int = 0) -> str:
    """The nth fenced block after the heading (its body, between the fences)."""
    lines = text.split("\n")
    i, seen = _after(lines, heading), -1
    while True:
        i = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        seen += 1
        close = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if seen == nth:
            return "\n".join(lines[: i + 1] + transcript.rstrip("\n").split("\n") + lines[close:])
        i = close


def run_cli(args: list[str], env: dict[str, str] | None = None, cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m ml_skills.cli ARGS` in a child process, as `ml-skills ARGS` runs."""
    return subprocess.run([sys.executable, "-m", "ml_skills.cli", *args], env={**os.environ, **(env or {})},
                          cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def shown(cmd: str, proc: subprocess.CompletedProcess[str]) -> str:
    """`$ cmd` then what the terminal showed (stdout, then stderr for an error)."""
    return f"$ {cmd}\n{proc.stdout}{proc.stderr}".rstrip("\n")
