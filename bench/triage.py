"""Measure triage-runs: N run directories with 1 and 2 workers, beside N sequential check-failed-run processes.

    PYTHONPATH=server:. python bench/triage.py --runs 200 --size 1M
    PYTHONPATH=server:. python bench/triage.py --runs 1000 --size 1M-10M --distinct 10 --sample 10 --ray

Each run directory holds one generated training log (bench/genlog.py: real corpus failures
planted in a realistic mix of formats; `--distinct` logs with different seeds, hard-linked
across the runs). Every command runs in its own child process; wall time and the child's CPU
time (user + system, from wait4) are reported, because the machine's cores are shared. The
sequential baseline runs `--sample` check-failed-run processes and scales to N. Prints a
Markdown table and checks that 1 and 2 workers give the same groups.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from genlog import generate, parse_size


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, float, int]:
    """(wall s, CPU s of the process and every descendant, peak RSS MB of any one of them, exit code).

    Pool workers are children of the forkserver, not of the command, so wait4 never counts them:
    the tree is sampled every 50 ms with psutil and each process's last CPU reading is summed."""
    import psutil

    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    top = psutil.Process(proc.pid)
    cpu: dict[int, float] = {}
    rss: dict[int, float] = {}
    while proc.poll() is None:
        try:
            tree = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        for p in tree:
            try:
                t = p.cpu_times()
                cpu[p.pid] = t.user + t.system  # not children_*: a reaped worker is already counted as itself
                rss[p.pid] = max(rss.get(p.pid, 0.0), p.memory_info().rss / 2**20)
            except psutil.Error:
                continue
        time.sleep(0.05)
    wall = time.monotonic() - t0
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{cmd} failed: {err}")
    return wall, sum(cpu.values()), max(rss.values(), default=0.0), proc.returncode


def start_ray(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`ray start --head --block` on loopback in its own session (as tests/grid/test_ray.py does)."""
    import signal  # noqa: F401 - used by stop_ray
    import socket

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    head = subprocess.Popen([str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
                             "--port", str(port), "--num-cpus", "2", "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", temp],
                            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    while True:
        with socket.socket() as sk:
            if sk.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.5)
    time.sleep(5)  # the raylet registers after the GCS listens
    return head, f"127.0.0.1:{port}"


def stop_ray(head: subprocess.Popen[bytes]) -> None:
    import signal

    head.send_signal(signal.SIGTERM)
    try:
        head.wait(60)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(head.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def sizes(spec: str, distinct: int) -> list[int]:
    """Bytes of each distinct log: one size ('1M'), or a range ('1M-10M') spread evenly over the distinct logs."""
    lo, _, hi = spec.partition("-")
    a, b = parse_size(lo), parse_size(hi or lo)
    return [a + (b - a) * i // max(1, distinct - 1) for i in range(distinct)]


def build(root: Path, runs: int, size: str, distinct: int) -> Path:
    src = root / "src"
    src.mkdir()
    logs = []
    for i, n in enumerate(sizes(size, distinct)):
        p = src / f"log{i}.log"
        generate(p, n, seed=i)
        logs.append(p)
    grid = root / "grid"
    for i in range(runs):
        d = grid / f"run-{i:05d}"
        d.mkdir(parents=True)
        os.link(logs[i % distinct], d / "train.log")
    return grid


def groups(out: Path) -> list[tuple[str | None, int, list[str]]]:
    r = json.loads((out / "triage-runs.json").read_text())
    return [(g["fingerprint"], g["count"], g["runs"]) for g in r["groups"]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--size", default="1M", help="bytes per log: 100K, 1M, 10M, or a range 1M-10M over the distinct logs")
    ap.add_argument("--distinct", type=int, default=8, help="different generated logs, shared by hard links")
    ap.add_argument("--sample", type=int, default=10, help="sequential check-failed-run processes timed")
    ap.add_argument("--ray", action="store_true", help="also on a Ray head started here (2 CPUs, loopback); wall time only")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-triage-"))
    try:
        grid = build(root, args.runs, args.size, args.distinct)
        py = [sys.executable, "-m", "ml_skills.cli"]
        rows = []
        for w in (1, 2):
            out = root / f"out{w}"
            wall, cpu, rss, _ = timed([*py, "triage-runs", str(grid), "--workers", str(w), "--out-dir", str(out)], root)
            rows.append((f"triage-runs --workers {w}", wall, cpu, rss))
        same = groups(root / "out1") == groups(root / "out2")
        if args.ray:
            head, address = start_ray(root)
            try:
                wall, _, _, _ = timed([*py, "triage-runs", str(grid), "--ray", address, "--out-dir", str(root / "outray")], root)
            finally:
                stop_ray(head)
            rows.append(("triage-runs --ray (local head, 2 CPUs)", wall, None, None))
            same = same and groups(root / "out2") == groups(root / "outray")
        walls, cpus = [], []
        for i in range(args.sample):
            wall, cpu, _, _ = timed([*py, "check-failed-run", str(grid / f"run-{i:05d}"), "--out-dir", str(root / "single")], root)
            walls.append(wall)
            cpus.append(cpu)
        per_wall, per_cpu = sorted(walls)[len(walls) // 2], sorted(cpus)[len(cpus) // 2]
        rows.append((f"{args.runs} x check-failed-run (median of {args.sample}, scaled)", per_wall * args.runs, per_cpu * args.runs, None))
        print(f"{args.runs} run directories, one {args.size} log each ({args.distinct} distinct logs); 2 shared cores\n")
        print("| command | wall s | CPU s | per run: wall ms | per run: CPU ms | peak RSS of a process, MB |")
        print("|---|---|---|---|---|---|")
        for name, wall, cpu, rss in rows:
            c, cr = ("", "") if cpu is None else (f"{cpu:.1f}", f"{1000 * cpu / args.runs:.0f}")
            print(f"| {name} | {wall:.1f} | {c} | {1000 * wall / args.runs:.0f} | {cr} | {'' if rss is None else f'{rss:.0f}'} |")
        print(f"\nsame groups with every backend: {same}")
        print(f"one check-failed-run process: median {per_wall * 1000:.0f} ms wall, {per_cpu * 1000:.0f} ms CPU")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
