"""Context cost: the bytes each answer puts in an assistant's context, beside the size of the log it read.

    PYTHONPATH=server:. python bench/context_cost.py [--sample N] [--json FILE] [LOG ...]

Starts one ml-skills-mcp server (this tree's code) over stdio with the MCP SDK's own client and
calls every evidence tool that takes a log on each log of tests/corpus, tests/real-logs,
/work/shared/real-logs (when present) and examples/ (identical files counted once), then runs the
CLI (`check-failed-run --format text`, `--format json`, `--format json --pretty` and
`--fields`) in-process on the same logs. For each it prints the bytes returned (median, p95, max)
as a markdown table, beside the log sizes.

A tool result reaches the model in one of two forms: Claude Code hands it the structured content
as JSON, other clients the text content. Both are measured (`structured`, `text`); `model` is the
larger of the two (what one model pays, whichever its client is), `wire` their sum.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path("/work/shared/real-logs")
ALL_PARTS = ["evidence", "excerpt", "ruled_out", "fixes", "findings", "trajectory", "anomalies", "artifacts", "last_progress", "sources"]


def default_logs() -> list[Path]:
    found = [*sorted((ROOT / "tests" / "corpus").glob("*/train.log")), *sorted((ROOT / "tests" / "real-logs").glob("*/train.log")),
             *sorted(SHARED.glob("*/train.log")), *sorted((ROOT / "examples").glob("*/*.log"))]
    seen: set[str] = set()
    out = []
    for p in found:
        h = hashlib.sha256(p.read_bytes()).hexdigest()
        if h not in seen:
            seen.add(h)
            out.append(p)
    return out


def sizes(r: Any) -> dict[str, int]:
    text = "\n".join(c.text for c in r.content if getattr(c, "type", "") == "text")
    t = len(text.encode())
    s = len(json.dumps(r.structured_content, separators=(",", ":"), ensure_ascii=False).encode()) if r.structured_content is not None else 0
    return {"text": t, "structured": s, "model": max(t, s), "wire": t + s}


async def mcp_sizes(logs: list[Path], out_dir: Path, server_path: Path, only_diagnose: bool) -> dict[str, list[dict[str, Any]]]:
    from mcp import Client, StdioServerParameters

    roots = [ROOT, out_dir] + ([SHARED] if SHARED.exists() else [])
    args = ["-m", "ml_skills.mcp_tools.app", "--out-dir", str(out_dir), "--audit-log", str(out_dir / "audit.jsonl")]
    for r in roots:
        args += ["--allow-root", str(r)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(server_path), env.get("PYTHONPATH", "")])
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(out_dir))
    rows: dict[str, list[dict[str, Any]]] = {}

    def add(name: str, log: Path, r: Any) -> dict[str, Any]:
        row = {"log": str(log), "log_bytes": log.stat().st_size, "error": bool(r.is_error), **sizes(r)}
        rows.setdefault(name, []).append(row)
        return row

    async with Client(params, read_timeout_seconds=300) as c:
        for i, log in enumerate(logs):
            d = await c.call_tool("diagnose", {"target": str(log)})
            add("diagnose", log, d)
            if only_diagnose:
                continue
            add("diagnose detail=all parts", log, await c.call_tool("diagnose", {"target": str(log), "detail": ALL_PARTS}))
            add("read_report trajectory,anomalies", log, await c.call_tool("read_report", {"fields": ["trajectory", "anomalies"]}))
            add("scan_log", log, await c.call_tool("scan_log", {"path": str(log)}))
            add("read_log_tail (200 lines)", log, await c.call_tool("read_log_tail", {"path": str(log)}))
            add("grep_log 'error' (context 2)", log, await c.call_tool("grep_log", {"path": str(log), "pattern": "(?i)error", "context": 2}))
            line = 1
            sc = d.structured_content or {}
            for e in sc.get("evidence", []):
                head = e.split(": ", 1)[0]
                if ":" in head and head.rsplit(":", 1)[1].isdigit():
                    line = int(head.rsplit(":", 1)[1])
                    break
            add("read_log_window (±20 lines)", log, await c.call_tool("read_log_window", {"path": str(log), "line": line}))
            add("list_artifacts (log's directory)", log, await c.call_tool("list_artifacts", {"path": str(log.parent)}))
            if (i + 1) % 50 == 0:
                print(f"  mcp: {i + 1}/{len(logs)} logs", file=sys.stderr)
    return rows


def cli_sizes(logs: list[Path], out_dir: Path) -> dict[str, list[dict[str, Any]]]:
    from ml_skills import cli

    runs = {
        "CLI --format text": [],
        "CLI --format json": ["--format", "json"],
        "CLI --format json --pretty": ["--format", "json", "--pretty"],
        "CLI --fields primary_cause,decision,fixes.risk": ["--format", "json", "--fields", "primary_cause,decision,fixes.risk"],
    }
    rows: dict[str, list[dict[str, Any]]] = {}
    for log in logs:
        for name, extra in runs.items():
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
                code = cli.main(["check-failed-run", str(log), "--out-dir", str(out_dir), *extra])
            n = len(buf.getvalue().encode())
            rows.setdefault(name, []).append({"log": str(log), "log_bytes": log.stat().st_size, "error": code not in (0, 1),
                                              "text": n, "structured": 0, "model": n, "wire": n})
    return rows


def p95(v: list[int]) -> int:
    s = sorted(v)
    return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def fmt(n: float) -> str:
    return f"{n / 1024:.1f}"


def table(rows: dict[str, list[dict[str, Any]]]) -> Iterable[str]:
    yield ("| answer | calls | model KB median / p95 / max | text KB median / p95 / max | structured KB median / p95 / max "
           "| wire KB max | over 20 KB logs: answer < log | errors |")
    yield "|---|---:|---|---|---|---:|---|---:|"
    def col(rs: list[dict[str, Any]], k: str) -> str:
        v = [r[k] for r in rs]
        return f"{fmt(statistics.median(v))} / {fmt(p95(v))} / {fmt(max(v))}" if any(v) else "-"

    for name, rs in rows.items():
        big = [r for r in rs if r["log_bytes"] > 20 * 1024]
        smaller = sum(r["model"] < r["log_bytes"] for r in big)
        yield (f"| {name} | {len(rs)} | {col(rs, 'model')} | {col(rs, 'text')} | {col(rs, 'structured')} | {fmt(max(r['wire'] for r in rs))} "
               f"| {smaller} of {len(big)} | {sum(r['error'] for r in rs)} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="*", type=Path, help="logs to measure (default: the corpus, the real logs and the examples)")
    ap.add_argument("--sample", type=int, default=1, help="measure every Nth log only (default: all)")
    ap.add_argument("--json", type=Path, help="also write every row to this file")
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI runs")
    ap.add_argument("--server-pythonpath", type=Path, default=ROOT / "server",
                    help="the server/ folder whose ml-skills-mcp to measure (default: this tree's; another tree's for a before figure)")
    ap.add_argument("--only-diagnose", action="store_true", help="call diagnose only (with an older server that has no read_report)")
    a = ap.parse_args(argv)
    logs = [p.resolve() for p in a.logs] or default_logs()[:: a.sample]
    with tempfile.TemporaryDirectory(prefix="ctx-cost-") as tmp:
        out = Path(tmp)
        rows = anyio.run(mcp_sizes, logs, out, a.server_pythonpath, a.only_diagnose)
        if not a.no_cli:
            rows.update(cli_sizes(logs, out))
    v = [p.stat().st_size for p in logs]
    print(f"{len(logs)} logs: {fmt(statistics.median(v))} KB median, {fmt(p95(v))} KB p95, {fmt(max(v))} KB max; "
          f"{sum(x > 20 * 1024 for x in v)} over 20 KB\n")
    for line in table(rows):
        print(line)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
