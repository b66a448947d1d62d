"""Every measurement of the performance goals, against ripgrep and grep, in one run.

    python bench/run.py --size 1G               # the table for docs/performance.md
    python bench/run.py --size 1G --memory 5G   # plus the flat-memory check on a 5 GiB log

Each measurement runs in its own child process; os.wait4 gives that child's CPU time and peak
RSS. Throughput is computed from CPU time (user + system), because this machine's 2 cores are
shared and wall time mostly measures the neighbours; wall time is shown too. Ratios compare
figures taken in the same run; absolute times are noise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "server"), str(ROOT)]

from bench.ckpt import GiB, big_run_dir
from bench.genlog import generate, parse_size
from bench.patterns import export

TIME = "/usr/bin/time"


@dataclass
class Run:
    wall: float
    cpu: float
    rss_mb: float
    out: str
    warm: float | None = None  # CPU of the work alone, patterns compiled and modules imported beforehand


def measure(cmd: list[str], repeat: int = 1, env: dict | None = None, keep_output: bool = True) -> Run:
    """Run cmd `repeat` times; keep the run with the least CPU time (the least disturbed)."""
    best: Run | None = None
    for _ in range(repeat):
        t = time.perf_counter()
        # /usr/bin/time is a small parent: a child forked from this (large) process would report
        # this process's peak RSS as its own, since Linux carries the high-water mark over exec
        p = subprocess.Popen([TIME, "-f", "%U %S %M", *cmd], stdout=subprocess.PIPE if keep_output else subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=env)
        out, err = (x.decode(errors="replace") if x else "" for x in p.communicate())
        wall = time.perf_counter() - t
        if p.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed: {err.strip()[-500:]}")
        user, system, rss_kb = err.strip().splitlines()[-1].split()
        run = Run(wall, float(user) + float(system), int(rss_kb) / 1024, out)
        if best is None or run.cpu < best.cpu:
            best = run
    assert best is not None
    return best


def ensure_rg() -> str:
    rg = shutil.which("rg")
    if rg is None:
        print("ripgrep missing: apt-get install -y ripgrep", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-qq", "ripgrep"], check=False, stdout=subprocess.DEVNULL)
        rg = shutil.which("rg")
    if rg is None:
        raise SystemExit("ripgrep is not installed and could not be installed: apt-get install ripgrep")
    return rg


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT / "server"), str(ROOT), e.get("PYTHONPATH", "")])
    return e


def probe(*args: str, repeat: int = 1, extra_env: dict | None = None) -> tuple[Run, dict]:
    r = measure([sys.executable, str(ROOT / "bench" / "probe.py"), *args], repeat, {**env(), **(extra_env or {})})
    j = json.loads(r.out.strip().splitlines()[-1])
    r.warm = j.get("warm_cpu")
    return r, j


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G", help="size of the main generated log (default 1G)")
    ap.add_argument("--memory", help="also check memory on a log this large, e.g. 5G (generated, then deleted)")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the logs are generated (default /tmp)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the least disturbed is kept")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    ap.add_argument("--mcp-pythonpath", help="where ml_skills.mcp_tools lives, if not in this tree (a branch's server/ folder)")
    ap.add_argument("--everyday", action="store_true", help="also issue 17's everyday logs: 10 MiB and 1 MiB check-failed-run, "
                                                              "cold and warm cache, paired with `python -c 'import pydantic'`")
    ap.add_argument("--everyday-only", action="store_true", help="only that measurement (a minute), none of the rest")
    ap.add_argument("--pairs", type=int, default=15, help="paired rounds of the everyday measurement (default 15)")
    args = ap.parse_args()
    if args.everyday_only:
        print(everyday(Path(args.dir), args.pairs))
        return
    rg = ensure_rg()
    if not Path(TIME).exists():
        subprocess.run(["apt-get", "install", "-y", "-qq", "time"], check=False, stdout=subprocess.DEVNULL)
    if not Path(TIME).exists():
        raise SystemExit("/usr/bin/time is missing and could not be installed: apt-get install time")
    work = Path(tempfile.mkdtemp(prefix="ml-skills-bench-", dir=args.dir))
    rows: list[tuple[str, Run, int, str]] = []
    facts: dict = {}
    try:
        size = parse_size(args.size)
        log, small, tiny = work / "train.log", work / "small.log", work / "tiny.log"
        print(f"generating {size / 2**20:.0f} MiB log in {work} ...", file=sys.stderr)
        facts["truth"] = generate(log, size)
        generate(small, 2**20, seed=1)
        generate(tiny, 10 * 2**10, seed=2)
        size = log.stat().st_size
        pats_rg, pats_ere = export(work)
        n = args.repeat
        rows.append(("cat (read limit)", measure(["cat", str(log)], n, keep_output=False), size, ""))
        # goal 1's ratios: rg, the signature scan and the full pass back to back in each round, so
        # a ratio compares runs seconds apart (this machine's speed drifts by half over minutes)
        rounds: list[tuple[Run, Run, Run]] = []
        for _ in range(n):
            r = measure([rg, "--no-unicode", "-c", "-f", str(pats_rg), str(log)], 1)
            s, sj = probe("sigscan", str(log))
            f, fj = probe("scan", str(log))
            rounds.append((r, s, f))
        rg_run = min((r for r, _, _ in rounds), key=lambda x: x.cpu)
        sig = min((s for _, s, _ in rounds), key=lambda x: x.cpu)
        full = min((f for _, _, f in rounds), key=lambda x: x.cpu)
        facts["paired"] = paired = {
            "sig_warm": sorted(r.cpu / s.warm for r, s, _ in rounds), "sig_cpu": sorted(r.cpu / s.cpu for r, s, _ in rounds),
            "full_warm": sorted(r.cpu / f.warm for r, _, f in rounds), "full_cpu": sorted(r.cpu / f.cpu for r, _, f in rounds)}
        rows.append(("rg --no-unicode -c -f patterns", rg_run, size, f"{rg_run.out.strip()} lines"))
        gr = measure(["grep", "-E", "-c", "-f", str(pats_ere), str(log)], n, dict(os.environ, LC_ALL="C"))
        rows.append(("LC_ALL=C grep -E -c -f patterns", gr, size, f"{gr.out.strip()} lines"))
        rows.append(("signature scan alone (hyperscan)", sig, size, f"{sj['matches']} matches"))
        sre, srj = probe("sigscan-re", str(small), repeat=1)
        rows.append(("signature scan alone, `re` fallback, 1 MiB log", sre, small.stat().st_size, f"{srj['matches']} matches"))
        rows.append(("full-log pass (scan_log)", full, size, f"{fj['hits']} hits, read {fj['read_bytes'] / size:.2f}x the file"))
        out = work / "out"
        out.mkdir()
        cli, cj = probe("cli", str(log), str(out), repeat=1)
        rows.append(("ml-skills check-failed-run (end to end)", cli, size, f"read {cj['read_bytes'] / size:.2f}x the file"))
        # a log of 128 MiB or more is scanned in one process per core (engine/read/parallel.py): the same run in one
        # process, for the wall-time ratio (CPU includes the workers; bytes read are the parent's only)
        cli1, _ = probe("cli", str(log), str(out), repeat=1, extra_env={"ML_SKILLS_SCAN_WORKERS": "1"})
        rows.append(("check-failed-run, one process (ML_SKILLS_SCAN_WORKERS=1)", cli1, size, f"wall {cli.wall / cli1.wall:.2f}x of this"))
        r1, _ = probe("scan", str(small), repeat=n)
        rows.append(("full-log pass, 1 MiB log", r1, small.stat().st_size, ""))
        # goal 1's memory check is on the whole diagnosing process: check-failed-run end to end
        c1, _ = probe("cli", str(small), str(out), repeat=n)
        rows.append(("check-failed-run, 1 MiB log", c1, small.stat().st_size, "memory baseline"))
        rbig = cbig = None
        if args.memory:
            big = work / "big.log"
            print(f"generating {args.memory} log for the memory check ...", file=sys.stderr)
            generate(big, parse_size(args.memory), seed=3)
            rbig, _bj = probe("scan", str(big), repeat=1)
            rows.append((f"full-log pass, {args.memory} log", rbig, big.stat().st_size, ""))
            cbig, _ = probe("cli", str(big), str(out), repeat=1)
            rows.append((f"check-failed-run, {args.memory} log", cbig, big.stat().st_size, "memory check"))
            tbig, tbj = probe("tail", str(big), "500", repeat=n)
            rows.append((f"--last 500 (tail), {args.memory} log", tbig, tbj["read_bytes"], f"read {tbj['read_bytes']} bytes"))
            big.unlink()
        else:
            tbig, tbj = probe("tail", str(log), "500", repeat=n)
            rows.append(("--last 500 (tail), main log", tbig, tbj["read_bytes"], f"read {tbj['read_bytes']} bytes"))
        ttiny, ttj = probe("tail", str(tiny), "500", repeat=n)
        rows.append(("--last 500 (tail), 10 KiB log", ttiny, ttj["read_bytes"], f"read {ttj['read_bytes']} bytes"))
        ck = work / "ckpt"
        print("building a 10 GiB checkpoint directory (sparse) ...", file=sys.stderr)
        big_run_dir(ck, 10 * GiB)
        ck_size = sum(p.stat().st_size for p in ck.rglob("*") if p.is_file())
        ckr, ckj = probe("ckpt", str(ck), repeat=n)
        rows.append((f"inspect a {ck_size / GiB:.1f} GiB checkpoint directory", ckr, 0,
                     f"{ckj['seconds']:.3f} s in-process, read {ckj['read_bytes']} bytes; {ckj['checkpoints']}"))
        facts["ckpt"] = ckj
        help_run = measure([sys.executable, "-X", "importtime", "-m", "ml_skills.cli", "--help"], n, env())
        rows.append(("cold start: ml-skills --help", help_run, 0, ""))
        small_cli, scj = probe("cli", str(tiny), str(out), repeat=n)
        rows.append(("cold start: diagnose a 10 KiB log", small_cli, 0, f"heavy SDKs imported: {scj['heavy_sdks'] or 'none'}"))
        mcp_path = args.mcp_pythonpath or (str(ROOT / "server") if (ROOT / "server/ml_skills/mcp_tools/app.py").exists() else None)
        if mcp_path:
            ours = min((json.loads(measure([sys.executable, str(ROOT / "bench/mcp_cold.py"), "ml-skills", mcp_path], 1, env()).out)
                        for _ in range(n)), key=lambda d: d["seconds"])
            bare = min((json.loads(measure([sys.executable, str(ROOT / "bench/mcp_cold.py"), "bare", str(ours["tools"])], 1, env()).out)
                        for _ in range(n)), key=lambda d: d["seconds"])
            facts["mcp"] = {"ours": ours, "bare": bare}
        print(table(rows, rg_run))
        print()
        print(goals(rows, rg_run, sig, full, cli, c1, cbig, tbig, ttiny, help_run, scj, ckj, facts.get("mcp"), paired))
        if args.everyday:
            print()
            print(everyday(Path(args.dir), args.pairs))
        if args.json:
            Path(args.json).write_text(json.dumps({"rows": [(a, b.__dict__ | {"out": ""}, c, d) for a, b, c, d in rows], **facts}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _cli(log: Path, out: Path) -> list[str]:
    """check-failed-run as a user runs it: the installed console script beside this Python when there is one (run by
    this Python, not through a version manager's shim), else `python -m ml_skills.cli`; this tree's code either way."""
    script = Path(sys.executable).parent / "ml-skills"
    head = [sys.executable, str(script)] if script.is_file() else [sys.executable, "-m", "ml_skills.cli"]
    return [*head, "check-failed-run", str(log), "--out-dir", str(out), "--format", "json"]


def _timed(cmd: list[str], env: dict) -> Run:
    """One run of cmd: wall time, and its CPU time from the kernel's accounting of the reaped child (microseconds,
    where /usr/bin/time prints hundredths: too coarse for a 0.1 s process)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = p.stderr.read() if p.stderr else b""
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed: {err.decode(errors='replace').strip()[-500:]}")
    return Run(wall, usage.ru_utime + usage.ru_stime, 0.0, "")


def _paired(a: list[str], b: list[str], pairs: int, env_a, env_b) -> list[tuple[Run, Run]]:
    """A and B in turn, `pairs` times after one warm-up each: this machine's speed drifts, a pair's ratio does not.
    env_a is called before each run of A (a fresh cache directory for the cold runs)."""
    _timed(a, env_a())
    _timed(b, env_b)
    return [(_timed(a, env_a()), _timed(b, env_b)) for _ in range(pairs)]


def _spread(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"{xs[len(xs) // 2]:.3f} ({xs[0]:.3f}-{xs[-1]:.3f})"


def everyday(where: Path, pairs: int) -> str:
    """Issue 17's everyday logs: whole-process check-failed-run on a 10 MiB and a 1 MiB generated log, the pattern cache
    warm (written by a first run) and cold (a new, empty cache directory each run), each paired run by run with
    `python -c "import pydantic"`. Bytecode is written and used (PYTHONDONTWRITEBYTECODE unset), as in an installed
    package. The load average before and after is printed with the table: on a shared machine it says how far the
    wall times are the neighbours'."""
    work = Path(tempfile.mkdtemp(prefix="ml-skills-everyday-", dir=where))
    try:
        base = {k: v for k, v in env().items() if k != "PYTHONDONTWRITEBYTECODE"}
        warm = {**base, "ML_SKILLS_CACHE": str(work / "cache")}
        logs = {"10 MiB": work / "10m.log", "1 MiB": work / "1m.log"}
        generate(logs["10 MiB"], 10 * 2**20)
        generate(logs["1 MiB"], 2**20, seed=1)
        (work / "out").mkdir()
        pyd = [sys.executable, "-c", "import pydantic"]
        load = [os.getloadavg()[0]]
        fresh = iter(range(10**6))
        rows = [(f"{name}, cache warm", _paired(_cli(log, work / "out"), pyd, pairs, lambda: warm, base))
                for name, log in logs.items()]
        rows.append(("10 MiB, cache cold (first run)", _paired(_cli(logs["10 MiB"], work / "out"), pyd, max(3, pairs // 3),
                                                              lambda: {**base, "ML_SKILLS_CACHE": str(work / f"cold{next(fresh)}")}, base)))
        load.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [(f"Everyday logs, whole process, {pairs} pairs (cold: {max(3, pairs // 3)}); load average {load[0]:.1f} before, "
              f"{load[1]:.1f} after, {os.cpu_count()} cores{' (under load)' if max(load) > 1.0 else ''}"),
             "",
             ("| check-failed-run | wall s median (min-max) | CPU s median | `python -c \"import pydantic\"` wall s | "
              "wall ratio, pair by pair | CPU ratio |"),
             "|---|---|---|---|---|---|"]
    for name, runs in rows:
        lines.append(f"| {name} | {_spread([a.wall for a, _ in runs])} | {_spread([a.cpu for a, _ in runs]).split()[0]} | "
                     f"{_spread([b.wall for _, b in runs]).split()[0]} | {_spread([a.wall / b.wall for a, b in runs])}x | "
                     f"{_spread([a.cpu / b.cpu for a, b in runs if b.cpu > 0])}x |")
    return "\n".join(lines)


def table(rows, rg_run: Run) -> str:
    head = ("| measurement | CPU s | wall s | MB/s (CPU) | vs rg | warm CPU s | warm vs rg | peak RSS MB | note |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---|")
    lines = [head]
    for name, r, nbytes, note in rows:
        tput = f"{nbytes / 1e6 / r.cpu:.3g}" if nbytes and r.cpu > 0 and "tail" not in name else ""
        ratio = f"{rg_run.cpu / r.cpu:.2f}x" if nbytes and "tail" not in name and r.cpu > 0 and "MiB log" not in name else ""
        warm = f"{r.warm:.3f}" if r.warm is not None else ""
        wratio = f"{rg_run.cpu / r.warm:.2f}x" if r.warm and ratio else ""
        lines.append(f"| {name} | {r.cpu:.3f} | {r.wall:.3f} | {tput} | {ratio} | {warm} | {wratio} | {r.rss_mb:.0f} | {note} |")
    return "\n".join(lines)


def goals(rows, rg_run, sig, full, cli, c1, cbig, tbig, ttiny, help_run, scj, ckj, mcp, paired) -> str:
    def ok(b: bool) -> str:
        return "met" if b else "NOT MET"

    out = ["| goal | figure | |", "|---|---|---|"]
    def med(xs: list[float]) -> str:
        return f"{xs[len(xs) // 2]:.2f}x (rounds {', '.join(f'{x:.2f}' for x in xs)})"

    fw, sw = paired["full_warm"], paired["sig_warm"]
    out.append(f"| 1. full pass >= rg throughput | warm {med(fw)}; whole process {med(paired['full_cpu'])} "
               f"| {ok(fw[len(fw) // 2] >= 1.0)} (warm, median of paired rounds) |")
    out.append(f"| 1. signature scan >= 1.5x rg | warm {med(sw)}; whole process {med(paired['sig_cpu'])} "
               f"| {ok(sw[len(sw) // 2] >= 1.5)} (warm, median of paired rounds) |")
    if cbig is not None:
        out.append(f"| 1. peak RSS of check-failed-run, big log within 64 MB of 1 MiB log | {cbig.rss_mb:.0f} MB vs {c1.rss_mb:.0f} MB "
                   f"({cbig.rss_mb - c1.rss_mb:+.0f}) | {ok(cbig.rss_mb - c1.rss_mb <= 64)} |")
    out.append(f"| 2. --last 500 big vs 10 KiB | {tbig.cpu:.3f} s vs {ttiny.cpu:.3f} s CPU (process incl. start-up) | {ok(tbig.cpu <= ttiny.cpu * 1.5 + 0.02)} |")
    out.append(f"| 4. 10 GiB checkpoint dir under 1 s, tensor data unread | {ckj['seconds']:.3f} s, {ckj['read_bytes']} bytes read, "
               f"all valid: {all(v for _, v in ckj['checkpoints'])} | {ok(ckj['seconds'] < 1 and ckj['read_bytes'] < 4 * 2**20)} |")
    if mcp:
        o, b = mcp["ours"], mcp["bare"]
        out.append(f"| 5. MCP first tools/list vs bare SDK server, {o['tools']} tools | {o['seconds']:.2f} s vs {b['seconds']:.2f} s "
                   f"({o['seconds'] / b['seconds']:.1f}x); heavy SDKs: {o['heavy_sdks'] or 'none'} | {ok(not o['heavy_sdks'])} |")
    else:
        out.append("| 5. MCP cold start | no MCP server in this tree (pass --mcp-pythonpath) | not measured |")
    out.append(f"| 5. no heavy SDK on a small diagnosis | {scj['heavy_sdks'] or 'none imported'} | {ok(not scj['heavy_sdks'])} |")
    out.append(f"| 5. --help cold start | {help_run.wall:.2f} s wall, {help_run.cpu:.2f} s CPU | |")
    out.append(f"| 6. check-failed-run within 2x of its scan | {cli.cpu / full.cpu:.2f}x | {ok(cli.cpu <= 2 * full.cpu)} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
