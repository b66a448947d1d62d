"""Measure the figures of docs/security.md by running the tests that prove each promise.

    python -m tests.security.report                      # the security tests, as CI runs them (~5 min on 2 cores)
    python -m tests.security.report --faults             # plus remote sources: faults and planted secrets (real MLflow, W&B, Vertex fakes, processes)
    python -m tests.security.report --long-fuzz 300      # plus a 300 s atheris run per target
    python -m tests.security.report --long-fuzz 300 --no-tests   # only the long atheris run

The tests record what they tried once their assertions pass (tests/security/figures.py); this
script runs them with ML_SKILLS_FIGURES set, reads the records back, and prints Markdown: the
tests run and passed per file, then each figure with its parts. A failing test records nothing,
so a figure is never counted from a check that did not hold.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from tests.security.figures import ENV

ROOT = Path(__file__).resolve().parents[2]
CORE = [
    "tests/security",
    "tests/mcp/test_safety.py",
    "tests/mcp/test_policy.py",
    "tests/mcp/test_http.py",
    "tests/mcp/test_tools.py::test_bad_calls_are_tool_errors_and_the_server_keeps_answering",
    "tests/mcp/test_tools.py::test_client_roots_widen_the_allowed_roots",
    "tests/collectors/test_ssh.py",
]
FAULTS = [
    ("tests/collectors/test_vertex.py", "drip or hang or reset or 429 or 5xx or refused or malformed or secrets"),
    ("tests/collectors/test_mlflow.py", "drip or reset or 503 or malformed or persistent or down or secrets"),
    ("tests/collectors/test_wandb.py", "drip or 429 or 500 or faults or down or secrets"),
    ("tests/collectors/test_process.py", "environment_never_leaves or secrets_on_the_command_line"),
]
FUZZ_TARGETS = ["scan_text", "parse_line", "parse_traceback", "inspect_checkpoint", "redact", "read_log", "fence", "cli_args",
                "safetensors_header", "checkpoint_dir", "wandb_run"]


def run_pytest(args: list[str], figures: Path, junit: Path) -> int:
    env = {**os.environ, ENV: str(figures)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *args]
    print("$", " ".join(cmd[1:]), file=sys.stderr)
    return subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode


def test_counts(junit: Path) -> dict[str, list[int]]:
    """file -> [passed, failed, skipped]."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for case in ET.parse(junit).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")  # tests.security.test_redact[.TestClass]
        name = next(("/".join(parts[:i]) + ".py" for i in range(len(parts), 0, -1) if (ROOT / ("/".join(parts[:i]) + ".py")).exists()),
                    ".".join(parts))
        kind = 1 if case.find("failure") is not None or case.find("error") is not None else 2 if case.find("skipped") is not None else 0
        out[name][kind] += 1
    return out


def max_len(target: str) -> int:
    from tests.security.test_fuzz import DEFAULT_MAX_LEN, MAX_LEN  # one table for the short and the long run

    return MAX_LEN.get(target, DEFAULT_MAX_LEN)


def long_fuzz(seconds: int) -> list[dict]:
    """Each target for `seconds`; a crashing input is kept in a directory named in the output."""
    rows = []
    crashes = Path(tempfile.mkdtemp(prefix="ml-skills-fuzz-crashes-"))
    for target in FUZZ_TARGETS:
        cmd = [sys.executable, "-m", "tests.security.fuzz", target, f"-max_total_time={seconds}", f"-max_len={max_len(target)}",
               f"-dict={ROOT / 'tests/security/fuzz.dict'}", f"-artifact_prefix={crashes}/{target}-"]
        print("$", " ".join(cmd[1:]), file=sys.stderr)
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = re.search(r"Done (\d+) runs in (\d+) second", proc.stderr)
        covs = re.findall(r"cov: (\d+)", proc.stderr)
        error = proc.stderr[proc.stderr.find("=== Uncaught"):][:2500] if "=== Uncaught" in proc.stderr else proc.stderr[-1500:]
        rows.append({"target": target, "ok": proc.returncode == 0, "runs": int(done.group(1)) if done else None,
                     "edges": int(covs[-1]) if covs else None, "wall": round(time.monotonic() - t0),
                     "cpu": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime),
                     "crash": "" if proc.returncode == 0 else f"input kept under {crashes}/{target}-*\n{error}"})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults", action="store_true", help="also run the remote-source fault tests (slow: real servers)")
    ap.add_argument("--long-fuzz", type=int, default=0, metavar="SECONDS", help="also fuzz every target for SECONDS")
    ap.add_argument("--no-tests", action="store_true", help="skip the test run (with --long-fuzz: only fuzz)")
    args = ap.parse_args(argv)
    rcs = [] if args.no_tests else tests_report(args.faults)
    if args.long_fuzz:
        rows = long_fuzz(args.long_fuzz)
        print(f"\n| atheris target ({args.long_fuzz} s each) | runs | coverage edges | CPU s | result |\n|---|---:|---:|---:|---|")
        for r in rows:
            print(f"| {r['target']} | {r['runs']} | {r['edges']} | {r['cpu']} | {'no crash' if r['ok'] else 'CRASH'} |")
        for r in rows:
            if r["crash"]:
                print(f"\n{r['target']} crashed:\n```\n{r['crash']}\n```")
        rcs += [0 if r["ok"] else 1 for r in rows]
    return max(rcs, default=0)


def tests_report(faults: bool) -> list[int]:
    """Run the tests with figures recorded; print the tables; return the pytest exit codes."""
    work = Path(tempfile.mkdtemp(prefix="ml-skills-report-"))
    figures = work / "figures.jsonl"
    figures.touch()
    t0 = time.monotonic()
    rcs = [run_pytest(CORE, figures, work / "core.xml")]
    counts = test_counts(work / "core.xml")
    if faults:
        for i, (path, sel) in enumerate(FAULTS):
            rcs.append(run_pytest([path, "-k", sel], figures, work / f"faults{i}.xml"))
            for k, v in test_counts(work / f"faults{i}.xml").items():
                counts[k] = [a + b for a, b in zip(counts.get(k, [0, 0, 0]), v, strict=True)]
    wall = time.monotonic() - t0

    print(f"## Security figures ({time.strftime('%Y-%m-%d', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}, {wall:.0f} s)\n")
    print("| test file | passed | failed | skipped |\n|---|---:|---:|---:|")
    for f in sorted(counts):
        p, x, s = counts[f]
        print(f"| {f} | {p} | {x} | {s} |")
    by_kind: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for line in figures.read_text().splitlines():
        r = json.loads(line)
        by_kind[r["kind"]][r["what"]] += r["n"]
    print("\n| figure | total | made of |\n|---|---:|---|")
    for kind in sorted(by_kind):
        parts = by_kind[kind]
        detail = "; ".join(f"{w}: {n:g}" for w, n in sorted(parts.items()))
        print(f"| {kind} | {sum(parts.values()):g} | {detail} |")
    return rcs


if __name__ == "__main__":
    sys.exit(main())
