"""Every "Done when" line of issue 17, side by side in one run, each a paired ratio against its reference.

    python bench/issue17.py                  # 10 MiB, 256 MiB, 1 GiB and 5 GiB logs in /tmp (deleted after)
    python bench/issue17.py --pairs 9 --memory 5G

Each line runs A and B in turn (`run._paired`), the ratio taken pair by pair and quoted as median (min-max): this
machine's speed drifts over minutes, a pair's ratio does not. The load average before and after is printed with the
table; on a shared machine only a low load says anything about the two-process line, which needs a free second core.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "server"), str(ROOT)]

from bench.genlog import generate, parse_size
from bench.patterns import export
from bench.run import TIME, _cli, _paired, _spread, ensure_rg, env, everyday, measure


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def _ratio_row(goal: str, runs, bar: str, met) -> tuple[str, str, str]:
    wall = [a.wall / b.wall for a, b in runs]
    cpu = [a.cpu / b.cpu for a, b in runs if b.cpu > 0]
    figure = (f"A {_spread([a.wall for a, _ in runs]).split()[0]} s, B {_spread([b.wall for _, b in runs]).split()[0]} s wall; "
              f"A/B wall {_spread(wall)}, CPU {_spread(cpu)} ({len(runs)} pairs)")
    return goal, figure, f"{'met' if met(_median(wall)) else 'NOT MET'} ({bar})"


def _mcp_pairs(pairs: int) -> list[tuple[float, float]]:
    """The MCP server's first tools/list against a bare SDK server with as many trivial tools, in turn; seconds to
    the answer as bench/mcp_cold.py measures them (spawn, initialize, tools/list)."""
    def once(*args: str) -> dict:
        out = subprocess.run([sys.executable, str(ROOT / "bench/mcp_cold.py"), *args], capture_output=True, env=env(),
                             check=True).stdout
        return json.loads(out)
    n = str(once("ml-skills", str(ROOT / "server"))["tools"])
    once("bare", n)
    return [(once("ml-skills", str(ROOT / "server"))["seconds"], once("bare", n)["seconds"]) for _ in range(pairs)]


def _big_logs(work: Path, rg: str, pairs: int, rows: list) -> None:
    pats, _ = export(work)
    base = {k: v for k, v in env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    warm = {**base, "ML_SKILLS_CACHE": str(work / "cache")}
    one = {**warm, "ML_SKILLS_SCAN_WORKERS": "1"}
    for label, size in (("256 MiB", 256 * 2**20), ("1 GiB", 2**30)):
        log = work / f"{size}.log"
        print(f"generating the {label} log ...", file=sys.stderr)
        generate(log, size, seed=4)
        cli = _cli(log, work / "out")
        rgcmd = [rg, "--no-unicode", "-c", "-f", str(pats), str(log)]
        rows.append(_ratio_row(f"{label}: check-failed-run (A) / `rg --no-unicode -c -f` (B), whole process",
                               _paired(cli, rgcmd, pairs, lambda: warm, base), "<= 1.0x", lambda m: m <= 1.0))
        if size == 2**30:
            rows.append(_ratio_row("1 GiB: two scanning processes (A) / one, `ML_SKILLS_SCAN_WORKERS=1` (B)",
                                   _paired(cli, cli, pairs, lambda: warm, one), "<= 0.667, i.e. >= 1.5x faster",
                                   lambda m: m <= 1 / 1.5))
        log.unlink()


def _memory(work: Path, memory: str, rows: list) -> None:
    out = work / "out"
    small, tiny, big = work / "1m.log", work / "10k.log", work / "big.log"
    generate(small, 2**20, seed=1)
    generate(tiny, 10 * 2**10, seed=2)
    print(f"generating the {memory} log ...", file=sys.stderr)
    generate(big, parse_size(memory), seed=3)
    e = env()
    c1 = measure(_cli(small, out), 3, e)
    cbig = measure(_cli(big, out), 1, e)
    big_mb, small_mb = round(cbig.rss_mb), round(c1.rss_mb)
    rows.append((f"peak RSS of check-failed-run, {memory} log within 64 MB of a 1 MiB log",
                 f"{big_mb} MB against {small_mb} MB ({big_mb - small_mb:+d} MB)", "met" if big_mb - small_mb <= 64 else "NOT MET"))
    # the tail read behind the MCP tool read_log_tail and the report's --last window, each in its own process
    probe = [sys.executable, str(ROOT / "bench/probe.py"), "tail"]
    runs = _paired([*probe, str(big), "500"], [*probe, str(tiny), "500"], 7, lambda: e, e)
    rows.append(_ratio_row(f"the last 500 lines (read_log_tail, --last): {memory} log (A) / 10 KiB log (B)", runs,
                           "constant: <= 1.5x", lambda m: m <= 1.5))
    big.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=7, help="paired rounds per line (default 7; the 10 MiB line 15)")
    ap.add_argument("--memory", default="5G", help="the flat-memory log's size (default 5G)")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the logs are generated (default /tmp)")
    args = ap.parse_args()
    rg = ensure_rg()
    if not Path(TIME).exists():
        raise SystemExit("/usr/bin/time is missing: apt-get install time")
    load = [os.getloadavg()[0]]
    work = Path(tempfile.mkdtemp(prefix="ml-skills-issue17-", dir=args.dir))
    rows: list[tuple[str, str, str]] = []
    try:
        (work / "out").mkdir()
        print(everyday(work, max(15, args.pairs)))
        _big_logs(work, rg, args.pairs, rows)
        mcp = _mcp_pairs(args.pairs)
        r = [a / b for a, b in mcp]
        rows.append(("MCP server's first tools/list (A) / a bare SDK server with as many tools (B)",
                     (f"A {_spread([a for a, _ in mcp]).split()[0]} s, B {_spread([b for _, b in mcp]).split()[0]} s; "
                      f"A/B {_spread(r)} ({len(mcp)} pairs)"), f"{'met' if _median(r) <= 1.1 else 'NOT MET'} (<= 1.1x)"))
        _memory(work, args.memory, rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load.append(os.getloadavg()[0])
    print(f"\nIssue 17's other lines; load average {load[0]:.1f} before, {load[1]:.1f} after, {os.cpu_count()} cores\n")
    print("| goal | figure | |\n|---|---|---|")
    for goal, figure, verdict in rows:
        print(f"| {goal} | {figure} | {verdict} |")


if __name__ == "__main__":
    main()
