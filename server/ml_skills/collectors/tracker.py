"""What an experiment tracker knows about one run, in one shape for W&B and MLflow alike.

The collectors fill a `TrackerRun` (state, config, summary, every history point, system
memory peaks, artifacts, the run's own logs) and `to_evidence` turns it into raw evidence:
history rows keyed by step, so metrics logged in separate calls line up; keys folded into
canonical names (models.canonical), so the same trajectory detectors run as on a log; the
logs' text handed over unread, for the engine to scan with the same catalog. Nothing is cut silently: every cap that bites is named in `missing`.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ml_skills.collectors import env_seconds
from ml_skills.models import EvidenceStatus, MetricPoint, RawEvidence, RawLog, SourceEvidence, canonical
from ml_skills.safety.paths import open_binary
from ml_skills.safety.redact import redact, redact_named

MAX_ROWS = 500_000  # history rows (steps) kept per run
MAX_KEYS = 10_000  # distinct metric names counted per run: a file of a million distinct tags must not keep a million names
MAX_POINTS = 50_000  # rows handed to the trajectory detectors; an even sample above this
MAX_LOG_BYTES = 4 * 1024 * 1024  # tail of each run log read
MAX_LOGS = 4
MAX_ARTIFACTS = 500
MAX_NAME = 120  # a config, summary or fact name as shown
MAX_FACT = 500  # a fact's value as shown (a run's name, id, project): a .wandb run record named with 30 MB came back whole
DEADLINE_S = 60.0  # whole collection; ML_SKILLS_TRACKER_TIMEOUT overrides (seconds)

# GPU and host memory, as MLflow (system/...) and W&B (system.gpu.0.memoryAllocatedBytes, ...) name them
_SYSTEM_MEM = re.compile(
    r"(?i)^(system[/.])?(gpu[._/]?\d*[._/]?mem\w*|gpu_\d+_memory\w*|system_memory\w*|proc\.memory\.\w+|memory_percent|memory\b\w*)$"
)
_LOG_NAME = re.compile(r"(?i)(^|/)(output\.log|[^/]*\.log|[^/]*\.out|[^/]*\.err|stdout[^/]*|stderr[^/]*|console[^/]*\.txt)$")


def deadline_s() -> float:
    return env_seconds("ML_SKILLS_TRACKER_TIMEOUT", DEADLINE_S, high=3600.0)


def is_log_name(path: str) -> bool:
    return bool(_LOG_NAME.search(path))


def tracked(key: str) -> bool:
    """Whether a metric's whole history is worth fetching: a canonical metric or system memory."""
    return canonical(key) is not None or _is_system_mem(key)


def _is_system_mem(key: str) -> bool:
    return bool(_SYSTEM_MEM.match(key)) and "avail" not in key.lower()  # free memory has no meaningful peak


@dataclass
class TrackerRun:
    kind: str  # wandb, mlflow
    name: str
    state: str | None = None
    facts: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    rows: dict[float, dict[str, float]] = field(default_factory=dict)
    times: dict[float, datetime] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # raw key -> points read
    system_peak: dict[str, float] = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)
    logs: dict[str, tuple[str, bool]] = field(default_factory=dict)  # name -> (text tail, cut)
    missing: list[str] = field(default_factory=list)
    dropped_rows: int = 0
    dropped_keys: int = 0  # values under names past the first MAX_KEYS distinct ones: not counted, not peaked

    def add(self, key: str, step: float, value: Any, when: datetime | None = None) -> None:
        """One history value; NaN and Inf are kept (they are the evidence), junk is skipped."""
        v = to_float(value)
        if v is None:
            return
        if key not in self.counts and len(self.counts) >= MAX_KEYS:
            self.dropped_keys += 1
            key_counted = False
        else:
            self.counts[key] = self.counts.get(key, 0) + 1
            key_counted = True
        c = canonical(key)
        if c is None:
            if key_counted and _is_system_mem(key) and math.isfinite(v):
                self.system_peak[key] = max(v, self.system_peak.get(key, v))
            return
        row = self.rows.get(step)
        if row is None:
            if len(self.rows) >= MAX_ROWS:
                self.dropped_rows += 1
                return
            row = self.rows[step] = {}
        row.setdefault(c, v)
        if when is not None:
            self.times.setdefault(step, when)


_STATE_WORD = re.compile(r"[A-Za-z][A-Za-z_-]{0,31}")


def read_tail(path: Path) -> tuple[str, bool]:
    """The last MAX_LOG_BYTES of a local run log, and whether the start was cut."""
    with open_binary(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_LOG_BYTES:
            f.seek(size - MAX_LOG_BYTES)
        return f.read(MAX_LOG_BYTES).decode("utf-8", errors="replace"), size > MAX_LOG_BYTES


def to_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        return float(value) if abs(value) < 2**1023 else (math.inf if value > 0 else -math.inf)  # float() overflows on larger ones
    if isinstance(value, str) and value.strip().lower() in ("nan", "inf", "-inf", "infinity", "-infinity"):
        return float(value.strip().lower().replace("infinity", "inf"))
    return None


def _cut(text: str, n: int) -> str:
    """Text a tracker returned, shown up to `n` characters (redacted as a whole before the cut where it matters)."""
    text = redact(str(text))  # before the cut: a token cut in half is no longer a pattern's match
    return text if len(text) <= n else text[:n] + f"... ({len(text):,} characters)"


def _fmt(v: Any, name: str = "") -> str:
    """A config or summary value as shown: cut, and redacted together with its name (a plain password under
    `db_password` is masked, though no pattern knows the value alone)."""
    f = to_float(v)
    if f is not None:
        return f"{f:.6g}"
    # redacted whole, then cut: cut first, a token straddling the cut showed its first characters (eighth round)
    text = json.dumps(v, default=str)[:65536] if not isinstance(v, str) else v[:65536]
    return _cut(redact_named(name, text), 120)


def _sample(rows: list[tuple[float, dict[str, float]]]) -> tuple[list[tuple[int, tuple[float, dict[str, float]]]], bool]:
    """(1-based index, row) for every row, or an even sample of MAX_POINTS keeping the rows detectors key on."""
    indexed = list(enumerate(rows, start=1))
    if len(rows) <= MAX_POINTS:
        return indexed, False
    stride = len(rows) / MAX_POINTS
    keep = {int(i * stride) for i in range(MAX_POINTS)} | {len(rows) - 1}
    nan = next((i for i, (_, v) in enumerate(rows) if any(not math.isfinite(x) for x in v.values())), None)
    gn = [(v["grad_norm"], i) for i, (_, v) in enumerate(rows) if math.isfinite(v.get("grad_norm", math.nan))]
    keep |= {i for i in (nan, max(gn)[1] if gn else None) if i is not None}
    return [indexed[i] for i in sorted(keep)], True


def to_evidence(run: TrackerRun) -> RawEvidence:
    """A tracker run as raw evidence: a SourceEvidence with metrics, plus the text of each run log, unread."""
    src = f"{run.kind}:{run.name}"
    rows = sorted((step, vals) for step, vals in run.rows.items() if vals)
    kept, sampled = _sample(rows)
    points = [
        MetricPoint(
            source=src,
            line_no=i,
            step=step,
            values=vals,
            time=run.times.get(step),
            split="eval" if all(k.startswith("val_") for k in vals) else "train",
        )
        for i, (step, vals) in kept
    ]
    missing = list(run.missing)
    if run.dropped_rows:
        missing.append(f"history over {MAX_ROWS} steps: {run.dropped_rows} later steps were not kept")
    if run.dropped_keys:
        missing.append(f"more than {MAX_KEYS} distinct metric names: {run.dropped_keys} values under later names were not counted "
                       "(the loss, lr, grad-norm and validation series are still read)")
    facts: dict[str, str] = {}
    if run.state:
        facts["run state"] = _cut(run.state, MAX_NAME)
    facts.update({_cut(k, MAX_NAME): _cut(v, MAX_FACT) for k, v in run.facts.items()})
    for k in sorted(run.config)[:12]:
        facts[f"config {_cut(k, MAX_NAME)}"] = _fmt(run.config[k], k)
    summ = {k: v for k, v in run.summary.items() if not k.startswith("_") and to_float(v) is not None}
    for k in sorted(summ, key=lambda k: (canonical(k) is None, k))[:12]:
        facts[f"summary {_cut(k, MAX_NAME)}"] = _fmt(summ[k])
    for k, v in sorted(run.system_peak.items())[:6]:
        facts[f"peak {k}"] = f"{v:.6g}"
    report = [f"Run: {run.kind} {redact(_cut(run.name, MAX_FACT))} ({_cut(run.state or 'state unknown', MAX_NAME)})"]
    if points:
        hist = ", ".join(f"{k} {n}" for k, n in sorted(run.counts.items()) if canonical(k) is not None)
        steps = [p.step for p in points if p.step is not None]
        report.append(f"History: {len(points)} steps ({_fmt(steps[0])}..{_fmt(steps[-1])}); points read: {hist}")
    elif any(m.startswith("history") for m in missing):
        report.append("History: could not be read (see Missing)")
    else:
        report.append("History: no loss, grad-norm, lr, throughput or validation metric was logged")
    if sampled:
        report.append(
            f"Analysed an even sample of {len(points)} of {len(rows)} steps "
            "(the first non-finite and the largest grad-norm steps exactly)"
        )
    if run.system_peak:
        report.append("System memory peaks: " + ", ".join(f"{k}={v:.4g}" for k, v in sorted(run.system_peak.items())[:4]))
    if run.artifacts:
        more = f" (first {MAX_ARTIFACTS})" if len(run.artifacts) >= MAX_ARTIFACTS else ""
        report.append(
            f"Artifacts{more}: " + ", ".join(redact(a) for a in run.artifacts[:12]) + (" ..." if len(run.artifacts) > 12 else "")
        )
    for m in missing:
        report.append(f"Missing: {redact(m)}")
    logs = [RawLog(source=f"{src}/{name}", text=text, notes=[f"only the last {MAX_LOG_BYTES // 1024} KiB of {name} were read"] if cut else [])
            for name, (text, cut) in list(run.logs.items())[:MAX_LOGS]]
    status = EvidenceStatus.PARTIAL if missing else EvidenceStatus.OK
    if not points and not logs and not run.state:
        status = EvidenceStatus.NO_DATA
    return RawEvidence(source=SourceEvidence(
        kind=run.kind,
        name=redact(run.name),
        status=status,
        # the state word only: a server's state field is its text, shown cut and marked in facts; before the twentieth round
        # a W&B state of 3 MB holding an instruction came back whole and bare in get_wandb_run's source.state
        state=run.state if run.state and _STATE_WORD.fullmatch(run.state) else None,
        facts={redact(k): redact(v) for k, v in facts.items()},
        report_lines=report,
        metrics=points,
        missing=[redact(m) for m in missing],
        details={
            "config": {_cut(k, MAX_NAME): _fmt(v, k) for k, v in list(run.config.items())[:200]},
            "artifacts": [redact(a) for a in run.artifacts[:MAX_ARTIFACTS]],
        },
    ), logs=logs)
