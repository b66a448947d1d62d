"""Every output of `check-failed-run` on a list of logs, from one tree's code, to compare two trees byte for byte.

    python bench/cli_outputs.py run --tree /path/to/main --logs logs.txt --out main.jsonl
    python bench/cli_outputs.py run --tree . --plain --logs logs.txt --out plain.jsonl
    python bench/cli_outputs.py compare main.jsonl plain.jsonl

`run` imports the tree's `ml_skills` (its server/ first on sys.path) and calls `cli.main` on each log with
`--format json` and `--format text`, recording stdout, stderr, the exit code and the report file, each with its
`created_at` taken out (the one field that differs run to run). Before each log the scan's engine choice is reset,
so each log is read with the engine a fresh process would choose (a log under 32 KiB with `re`). `--plain` gives the
models plainmodel.py's classes (modelkit.use_plain), as the CLI does for a log file. Logs are best copied with one
old mtime first, so that no log's age differs between the two runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

CREATED = re.compile(r'("created_at": ?)"[^"]*"')


def run(tree: Path, plain: bool, logs: list[str], out: Path) -> None:
    sys.path.insert(0, str(tree / "server"))
    if plain:
        from ml_skills import modelkit

        assert modelkit.use_plain(), "the models were imported before the plain classes could be chosen"
    from ml_skills import cli
    from ml_skills.engine.read import scan

    where = Path(tempfile.mkdtemp(prefix="cli-outputs-"))
    try:
        with out.open("w") as f:
            for log in logs:
                for fmt in ("json", "text"):
                    scan._compiled.clear()  # the engine a fresh process chooses
                    f.write(json.dumps(_one(cli, log, fmt, where)) + "\n")
    finally:
        shutil.rmtree(where, ignore_errors=True)
    if plain:
        assert "pydantic" not in sys.modules, "a plain run imported pydantic"


def _one(cli, log: str, fmt: str, where: Path) -> dict:
    out_dir = where / "out"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir()
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(["check-failed-run", log, "--out-dir", str(out_dir), "--format", fmt])
    report = out_dir / "check-failed-run.json"
    text = report.read_text("utf-8") if report.exists() else None

    def same(s: str) -> str:  # the output directory named as <OUT>: each run has its own
        return CREATED.sub(r"\1-", s).replace(str(out_dir), "<OUT>")
    return {"log": log, "format": fmt, "code": code, "stdout": same(stdout.getvalue()), "stderr": same(stderr.getvalue()),
            "report": same(text) if text is not None else None}


def compare(a: Path, b: Path) -> int:
    rows_a = [json.loads(x) for x in a.read_text().splitlines()]
    rows_b = [json.loads(x) for x in b.read_text().splitlines()]
    if len(rows_a) != len(rows_b):
        print(f"{len(rows_a)} outputs against {len(rows_b)}")
        return 1
    differ = [(x, y) for x, y in zip(rows_a, rows_b, strict=True) if x != y]
    for x, y in differ[:10]:
        parts = [k for k in x if x[k] != y[k]]
        print(f"DIFFERS: {x['log']} --format {x['format']}: {', '.join(parts)}")
    print(f"{len(rows_a) - len(differ)} of {len(rows_a)} outputs the same (stdout, stderr, exit code, report but created_at)")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--tree", type=Path, required=True)
    r.add_argument("--plain", action="store_true")
    r.add_argument("--logs", type=Path, required=True, help="a file naming one log per line")
    r.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args()
    if args.cmd == "compare":
        return compare(args.a, args.b)
    run(args.tree.resolve(), args.plain, args.logs.read_text().split("\n")[:-1], args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
