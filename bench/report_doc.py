"""Re-capture the example in docs/report.md from a fresh run, so the page never drifts from the code.

    python bench/report_doc.py          # rewrite the text report and the JSON blocks of docs/report.md
    python bench/report_doc.py --check  # exit 1 when the page differs from a fresh run

The run is examples/nan-late-batch/train.log (a real lab run). The text block is the report as
printed for `run/train.log`; the JSON block is check-failed-run.json shortened only by cutting
lists, as the page says (tests/test_docs.py checks both against a fresh diagnosis).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "report.md"
EXAMPLE = ROOT / "examples" / "nan-late-batch"
POINTS, EXCERPT_LINES, FIXES = 3, 5, 2


def fresh() -> tuple[str, str]:
    """The text report and the shortened JSON of a fresh diagnosis of the example."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        (run / "train.log").write_bytes((EXAMPLE / "train.log").read_bytes())
        proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "run/train.log", "--out-dir", "out"],
                              cwd=tmp, capture_output=True, text=True, timeout=300, check=True)
        report = proc.stdout.replace(str(Path(tmp)) + "/", "")
        subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "train.log", "--out-dir", "out"],
                       cwd=run, capture_output=True, text=True, timeout=300, check=True)  # the JSON as the page says it was made
        data = json.loads((run / "out" / "check-failed-run.json").read_text())
    text = "$ ml-skills check-failed-run run/train.log\n" + report.split("\nReport:")[0] + "\n"
    for s in data.get("trajectory", []):
        s["points"] = s["points"][:POINTS]
    ex = data.get("decisive_excerpt")
    if ex:
        cut = max(0, len(ex["lines"]) - EXCERPT_LINES)
        ex["lines"], ex["start_line"] = ex["lines"][cut:], ex["start_line"] + cut
    data["fixes"], data["findings"] = data["fixes"][:FIXES], data["findings"][:FIXES]
    data["created_at"] = "2026-11-29T18:53:40.000000Z"
    return text, json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def rewrite(page: str, text: str, js: str) -> str:
    """The page with its first plain code block and its first JSON block replaced."""
    head, rest = page.split("\n```\n", 1)
    _, tail = rest.split("```\n", 1)
    page = head + "\n```\n" + text + "```\n" + tail
    head, rest = page.split("```json\n", 1)
    _, tail = rest.split("```\n", 1)
    return head + "```json\n" + js + "```\n" + tail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    page = DOC.read_text()
    new = rewrite(page, *fresh())
    if a.check:
        return 0 if new == page else 1
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
