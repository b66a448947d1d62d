"""The smoke and probe runs: the script run for real on the CPU with a deadline, and the throughput the probe measured
turned into the full run's hours and cost.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ml_skills.checks.report import Check, Verdict


def run_check(name: str, script: Path, args: list[str], timeout: float, log_path: Path | None) -> tuple[Check, str, float]:
    """Run the script for real on the CPU; returns the check, its output and the wall time."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, str(script), *args], cwd=script.parent, env=env, capture_output=True,
                              text=True, timeout=timeout, errors="replace", check=False)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or "") if isinstance(e.stdout, str) else (e.stdout or b"").decode("utf-8", "replace")
        return Check(name=name, verdict=Verdict.FAIL, detail=f"did not finish within {timeout:g}s",
                     fix="make the smoke arguments smaller (few steps, tiny data)"), out, timeout
    wall = time.monotonic() - start
    out = proc.stdout + proc.stderr
    if log_path is not None:  # kept for the person, in --out-dir: the only write preflight makes besides its report
        from ml_skills.safety.paths import write_bytes

        # a new file renamed over the name, like the report: a link planted at preflight-smoke.log is replaced, never
        # written through (the smoke run's output once overwrote whatever `preflight-smoke.log -> ~/.bashrc` named)
        write_bytes(out.encode("utf-8", errors="replace"), log_path.parent, log_path.name)
    if proc.returncode != 0:
        from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

        d = diagnose(DiagnoseRequest(traceback_text=out[-200_000:]))
        cause = f"{d.primary_cause.value}: {d.root_cause.proximate[:200]}" if d.primary_cause else out.strip().splitlines()[-1:] or ["no output"]
        return Check(name=name, verdict=Verdict.FAIL, detail=f"exit {proc.returncode}; {cause}",
                     fix=d.fixes[0].action if d.fixes else "fix the failure before paying for the run"), out, wall
    return Check(name=name, verdict=Verdict.PASS, detail=f"exit 0 in {wall:.1f}s on the CPU"), out, wall


def throughput_check(out: str, samples_per_step: int | None, total_samples: int | None, epochs: float,
                     cost_per_hour: float | None, cap_hours: float | None, checkpointing_ok: bool) -> tuple[Check, dict[str, str]]:
    """Seconds per 1,000 samples measured between progress lines of the probe (startup excluded)."""
    from ml_skills.engine.read import metrics

    points = []
    t0 = None
    for line in out.splitlines():
        parsed = metrics.parse_line(line)
        ts = metrics.parse_timestamp(line)
        if parsed and parsed[1] is not None:
            points.append((parsed[1], ts, time.monotonic()))
        t0 = t0 or ts
    stamped = [(s, ts) for s, ts, _ in points if ts is not None]
    facts: dict[str, str] = {}
    if len(stamped) < 2 or not samples_per_step:
        return Check(name="throughput", verdict=Verdict.SKIP,
                     detail="probe printed fewer than two timestamped step lines, or --samples-per-step not given",
                     fix="log 'YYYY-mm-dd HH:MM:SS step N ...' lines and pass --samples-per-step"), facts
    (s0, a), (s1, b) = stamped[0], stamped[-1]
    seconds = (b - a).total_seconds()
    samples = (s1 - s0) * samples_per_step
    if samples < 1000 or seconds <= 0:
        return Check(name="throughput", verdict=Verdict.FAIL,
                     detail=f"the probe measured only {samples:g} samples over {seconds:g}s: need at least 1,000 for a budget",
                     fix="raise the probe's steps so it processes at least 1,000 samples"), facts
    per_1k = seconds / samples * 1000
    facts["seconds_per_1000_samples"] = f"{per_1k:.3f}"
    detail = f"{per_1k:.2f}s per 1,000 samples (measured over {samples:g} samples)"
    if total_samples:
        hours = per_1k * total_samples * epochs / 1000 / 3600
        facts["budget_hours"] = f"{hours:.2f}"
        detail += f"; full run {hours:.2f} h"
        if cost_per_hour:
            facts["budget_cost"] = f"{hours * cost_per_hour:.2f}"
            detail += f", cost {hours * cost_per_hour:.2f}"
        if cap_hours and hours > cap_hours and not checkpointing_ok:
            return Check(name="throughput", verdict=Verdict.FAIL, detail=detail + f" > platform cap {cap_hours:g} h, and the script cannot resume",
                         fix="add checkpoint-and-resume, or shrink the run below the cap"), facts
        if cap_hours and hours > cap_hours:
            return Check(name="throughput", verdict=Verdict.WARN, detail=detail + f" > platform cap {cap_hours:g} h: it will be cut and must resume"), facts
    return Check(name="throughput", verdict=Verdict.PASS, detail=detail), facts
