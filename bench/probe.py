"""One measurement in its own process, so its peak RSS and CPU time are its own (run.py calls this).

    python bench/probe.py sigscan FILE   # the catalog's signatures over the file, nothing else
    python bench/probe.py scan FILE      # the whole full-log pass (engine.scan.scan_log)
    python bench/probe.py cli FILE OUT   # ml-skills check-failed-run FILE, end to end
    python bench/probe.py tail FILE N    # what --last N costs: the tail read from the end
    python bench/probe.py ckpt DIR       # inventory a run directory, checkpoints inspected
    python bench/probe.py sigscan-re FILE  # the signatures with the `re` fallback engine

Prints one JSON object: seconds inside the process and bytes read (rchar from /proc), which
shows how many times the file was read.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _rchar() -> int:
    try:
        with open(f"/proc/{os.getpid()}/io") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("rchar:"))
    except OSError:
        return -1


def _cpu() -> float:
    """CPU of this process and of the children it reaped: a big log's parallel scan runs in forked workers."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main(argv: list[str]) -> None:
    what, path = argv[0], argv[1]
    t0 = time.perf_counter()
    r0 = _rchar()
    out: dict = {}
    c0 = None
    if what in ("sigscan", "sigscan-re"):
        from ml_skills.engine.read import scan

        engine = "re" if what == "sigscan-re" else None
        scan._signature_matcher(engine)  # compiled before the clock starts, as in a running server
        c0 = _cpu()
        out["matches"] = scan.signature_scan(path, engine=engine)
    elif what == "scan":
        from ml_skills.engine.read import gradmax, scan

        scan._matcher(None)
        if os.path.getsize(path) > scan.FULL_METRICS_BYTES:  # the grad-norm threshold scan of sampled logs
            gradmax._matcher(gradmax.level_at_most(gradmax.FLOOR), None)
        scan.newlines.use_vectors(os.path.getsize(path))  # numpy, for a log large enough to repay its import
        c0 = _cpu()
        ev = scan.scan_log(path)
        out["hits"] = len(ev.hits)
        out["first_nan_line"] = ev.trajectory.first_nan_line
    elif what == "cli":
        from ml_skills.cli import main as cli_main

        with open(os.devnull, "w") as null:
            stdout, sys.stdout = sys.stdout, null
            try:
                out["exit"] = cli_main(["check-failed-run", path, "--out-dir", argv[2], "--format", "json"])
            finally:
                sys.stdout = stdout
    elif what == "ckpt":
        from ml_skills.collectors.artifacts import inventory

        t0 = time.perf_counter()
        r0 = _rchar()
        inv = inventory(path)
        out["checkpoints"] = [(c.format, c.valid) for c in inv.checkpoints]
    elif what == "tail":
        from pathlib import Path

        from ml_skills.collectors.logfile import tail

        t0 = time.perf_counter()
        r0 = _rchar()
        lines, _ = tail(Path(path), int(argv[2]))
        out["lines"] = len(lines)
    else:
        raise SystemExit(f"unknown measurement {what}")
    out["seconds"] = time.perf_counter() - t0
    if c0 is not None:
        out["warm_cpu"] = _cpu() - c0
    out["read_bytes"] = _rchar() - r0
    # google and google.cloud alone are empty namespace packages a .pth file creates at start-up
    out["heavy_sdks"] = sorted(m for m in sys.modules if m.split(".")[0] in ("wandb", "mlflow") or m.startswith("google.cloud."))
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
