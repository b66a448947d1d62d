"""preflight-run: the cheap screens before a paid run.

Each screen is a function returning a Check (checks/screens/, one module per concern). They read the
script (AST, never executed except in the explicit smoke and probe runs), the data directory, and
the results archive; the smoke and probe runs are real child processes on the CPU with a deadline.
The gate fails closed on the screens that lose a run outright: a script that does not compile, a
failing smoke run, a data directory still being written, an eager load that cannot fit, a budget
over the cap with no checkpointing.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ml_skills.checks.report import Check, CheckReport, Verdict
from ml_skills.checks.screens.archive import archive_check, config_fingerprint
from ml_skills.checks.screens.data import completeness_check, memory_check
from ml_skills.checks.screens.launch import launch_check
from ml_skills.checks.screens.runs import run_check, throughput_check
from ml_skills.checks.screens.script import checkpoint_check, compile_check, script_text
from ml_skills.errors import InputError, TargetNotFound


def _size(text: str) -> int:
    m = re.fullmatch(r"(?i)\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text)
    if not m:
        raise InputError(f"cannot read size {text!r}: use e.g. 16G or 512M")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


@dataclass(frozen=True, kw_only=True)
class PreflightOptions:
    """What preflight-run screens and with which limits: one object, so the CLI and the MCP tool say only what they set.

    The defaults are the CLI's. `None` leaves a screen out (no smoke run, no data directory, no cap...).
    """

    script: str
    args: list[str] = field(default_factory=list)
    smoke_args: list[str] | None = None
    probe_args: list[str] | None = None
    samples_per_step: int | None = None
    total_samples: int | None = None
    epochs: float = 1.0
    cost_per_hour: float | None = None
    cap_hours: float | None = None
    data: str | None = None
    expect_shards: int | None = None
    marker: str | None = None
    shard_pattern: str = "*"
    quiet_seconds: float = 60.0
    memory_limit: str | None = None
    decode_bytes: int = 1
    launch: str | None = None
    results_archive: str | None = None
    timeout: float = 600.0
    out_dir: str | None = None


def preflight(o: PreflightOptions) -> CheckReport:
    s = Path(o.script)
    if not s.is_file():
        raise TargetNotFound(f"no training script at {s}")
    checks: list[Check] = []
    required = {"compile", "checkpointing"}
    comp, tree = compile_check(s)
    checks.append(comp)
    source = script_text(s)
    ck = checkpoint_check(tree, source)
    checks.append(ck)
    facts: dict[str, str] = {"fingerprint": config_fingerprint(s, o.args)}
    if o.smoke_args is not None and comp.verdict is Verdict.PASS:
        c, _, _ = run_check("smoke run", s, o.smoke_args, o.timeout, Path(o.out_dir) / "preflight-smoke.log" if o.out_dir else None)
        checks.append(c)
        required.add("smoke run")
    if o.probe_args is not None and comp.verdict is Verdict.PASS:
        c, out, _ = run_check("throughput probe run", s, o.probe_args, o.timeout, None)
        if c.verdict is Verdict.PASS:
            c, f = throughput_check(out, o.samples_per_step, o.total_samples, o.epochs, o.cost_per_hour, o.cap_hours,
                                    ck.verdict is Verdict.PASS)
            facts.update(f)
        checks.append(c)
        required.add(c.name)
    if o.data is not None:
        checks.append(completeness_check(Path(o.data), o.expect_shards, o.marker, o.shard_pattern, o.quiet_seconds))
        required.add("input completeness")
        mc, f = memory_check(Path(o.data), o.decode_bytes, _size(o.memory_limit) if o.memory_limit else None)
        checks.append(mc)
        facts.update(f)
        required.add("memory budget")
    checks.append(launch_check(o.launch, o.cap_hours))
    if o.launch:
        required.add("detached launch")
    checks.append(archive_check(Path(o.results_archive) if o.results_archive else None, s, o.args))
    if o.results_archive:
        required.add("results archive")
    required = {r for r in required if any(c.name == r and c.verdict is not Verdict.SKIP for c in checks)} | {"compile"}
    return CheckReport.gate("preflight-run", f"{s} {shlex.join(o.args)}".strip(), checks, required, facts)
