"""collect -> analyse -> classify -> plan -> decide: the whole engine behind every face.

`diagnose` takes a typed request and returns a `Diagnosis`; it never writes (render/ does).
Collectors for non-file targets (process, ssh, trackers, cloud) are looked up in COLLECTORS,
built from the registry of target kinds (targets.py), and imported only when used, so heavy
SDKs stay out of a plain log diagnosis. They return raw evidence (models.RawEvidence) and
never scan: the logs they found are read here (read_raw).
"""

from __future__ import annotations

import importlib
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ml_skills import __version__, targets
from ml_skills.collectors import artifacts as artifact_collector
from ml_skills.engine import explain
from ml_skills.engine.analyse import launchlimit, ranks
from ml_skills.engine.classify.freshstart import resumed_from_scratch
from ml_skills.engine.classify.insufficient import insufficient_evidence
from ml_skills.engine.classify.status import alive, completed_clean, outlived, run_status
from ml_skills.engine.classify.verdict import classify
from ml_skills.engine.plan.commands import diagnostic_commands
from ml_skills.engine.plan.decide import decide
from ml_skills.engine.plan.facts import contributing_facts, run_facts
from ml_skills.engine.plan.fixes import plan
from ml_skills.engine.read import excerpts, frameworks, scan
from ml_skills.errors import InputError, MLSkillsError, TargetNotFound
from ml_skills.modelkit import Field, create_model
from ml_skills.models import (
    ArtifactInventory,
    Classification,
    Diagnosis,
    Evidence,
    EvidenceItem,
    EvidenceStatus,
    Fix,
    Framework,
    Level,
    LogEvidence,
    Model,
    Progress,
    RawEvidence,
    RiskOf,
    RunFact,
    Task,
    ToolInfo,
    builtin_risk,
)
from ml_skills.safety import paths
from ml_skills.safety.quoting import pasteable
from ml_skills.safety.redact import redact, redact_in_line, redact_value, redaction_count, reset_redaction_count
from ml_skills.targets import Confine, TargetKind

MAX_LOGS = 16

COLLECTORS: dict[str, str] = {k.kind: f"ml_skills.collectors.{k.collector}:collect" for k in targets.KINDS if k.collector}
"""target kind -> "module:function", a models.Collector returning RawEvidence (read here, by read_raw; targets.py)."""
POLLING = {k.kind for k in targets.KINDS if k.waits}
"""Collectors that wait (poll until a terminal state) and so take a `progress` callback."""


class RequestOptions(Model):
    """What a diagnosis is asked besides its target; DiagnoseRequest adds one field per target input."""

    project: str | None = None
    region: str | None = None
    framework: Framework | None = None
    task: Task | None = None
    last: int = Field(500, ge=1, le=targets.MAX_LAST)
    artifacts: str | None = None
    interval: int = Field(60, ge=1)
    once: bool = True
    engine: str | None = Field(None, description="Force the scanning engine (hyperscan or re); tests only.")

    def given(self) -> list[targets.Input]:
        return [i for i in targets.INPUTS if getattr(self, i.field) is not None]

    def kind(self) -> TargetKind:
        other = [i for i in self.given() if i is not targets.TARGET]
        if other:
            return targets.of_input(other[0]).kind
        target = getattr(self, "target", None)
        if targets.is_remote(target):
            return TargetKind.SSH
        if target and Path(target).is_dir():
            return TargetKind.DIRECTORY
        return TargetKind.LOG

    def label(self) -> str:
        k = targets.BY_KIND[self.kind()]
        return k.label.format(getattr(self, k.input.field) or "")

    if TYPE_CHECKING:  # the target fields come from the registry below
        def __init__(self, **values: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...


if TYPE_CHECKING:
    DiagnoseRequest = RequestOptions
else:
    DiagnoseRequest = create_model(
        "DiagnoseRequest", __base__=RequestOptions, __module__=__name__, __doc__="Everything the engine needs to know about one diagnosis.",
        **{i.field: (int | None if i.integer else str | None, Field(None, description=i.description)) for i in targets.INPUTS},
    )


def collect(req: DiagnoseRequest, progress: Progress | None = None) -> Evidence:
    """Gather the evidence; `progress` hears about long scans and polls (the engine never prints).

    Every path read, including those found in the data (pointers, symlinks, a W&B latest-run),
    stays inside the active roots: the MCP call's, or else the directories this request names.
    """
    with paths.scope(*_local_paths(req)):
        return _collect(req, progress)


def _local_paths(req: DiagnoseRequest) -> list[str]:
    """The local files and directories a request names: without active roots, they are the roots.

    A process named by the person (an input confined as Confine.PROCESS) brings its own evidence, the
    logs it writes wherever they are: no roots then (the inventory still keeps to its own directory).
    """
    given = req.given()
    if any(i.confine is Confine.PROCESS for i in given):
        return []
    named = [getattr(req, i.field) for i in given if i.confine in (Confine.PATH, Confine.PATH_OR_REMOTE, Confine.PATH_OR_RUN)]
    return [p for p in (*named, req.artifacts) if p and not targets.is_remote(p)]


def _collect(req: DiagnoseRequest, progress: Progress | None) -> Evidence:
    kind = req.kind()
    ev = Evidence(target=req.label(), target_kind=kind, collected_at=datetime.now(UTC))
    if kind is TargetKind.TRACEBACK:
        ev.logs.append(scan.scan_text(req.traceback_text or "", source="pasted traceback", last=req.last, task=req.task))
    elif kind is TargetKind.LOG:
        if not req.target:
            raise InputError(f"no target: give {targets.choices(targets.INPUTS)}")
        ev.logs.append(scan.scan_log(req.target, last=req.last, task=req.task, engine=req.engine, progress=progress))
    elif kind is TargetKind.DIRECTORY:
        ev.artifacts, logs, notes = _scan_directory(Path(req.target or "."), req, progress=progress)
        ev.logs.extend(logs)
        ev.notes.extend(notes)
        from ml_skills.collectors import runstores  # the tracker readers load only for a directory target

        stores, notes = runstores.collect(Path(req.target or "."), req)
        ev.sources.extend(raw.source for raw in stores)
        ev.notes.extend(notes)
    else:
        spec = COLLECTORS.get(kind)
        if spec is None:
            raise InputError(f"target kind '{kind}' is not supported in this version")
        mod, fn = spec.split(":")
        extra = {"progress": progress} if kind in POLLING else {}
        raw = getattr(importlib.import_module(mod), fn)(req, **extra)
        ev.sources.append(raw.source)
        ev.logs.extend(read_raw(raw, req, progress))
    if req.artifacts and kind is not TargetKind.DIRECTORY:
        ev.artifacts, logs, notes = _scan_directory(Path(req.artifacts), req, exclude={l.source for l in ev.logs}, progress=progress)
        ev.logs.extend(logs)
        ev.notes.extend(notes)
    return ev


def read_raw(raw: RawEvidence, req: DiagnoseRequest, progress: Progress | None = None) -> list[LogEvidence]:
    """The logs a collector found, read as any log is: a local file streamed, fetched text scanned alike.

    A log that cannot be read is missing evidence of its source (named in `missing`, the source partial);
    a source's signal that names a log but no line stands at that log's last line, where the run was last seen.
    """
    logs: list[LogEvidence] = []
    for r in raw.logs:
        try:
            if r.path is not None:
                log = scan.scan_log(r.path, source=r.source, last=req.last, task=req.task, engine=req.engine, progress=progress)
            else:
                log = scan.scan_text(r.text or "", source=r.source, last=req.last, task=req.task, engine=req.engine)
        except MLSkillsError as e:
            raw.source.missing.append(redact(str(e)))
            if raw.source.status is EvidenceStatus.OK:
                raw.source.status = EvidenceStatus.PARTIAL
            continue
        if r.size_bytes is not None:
            log.size_bytes = r.size_bytes
        log.problems.extend(r.notes)
        logs.append(log)
    ends = {log.source: log.total_lines for log in logs if log.total_lines}
    for a in raw.source.signals:
        if a.line_no is None and a.source in ends:
            a.line_no = ends[a.source]
    return logs


def _scan_directory(root: Path, req: DiagnoseRequest, exclude: set[str] | frozenset[str] = frozenset(),
                    progress: Progress | None = None) -> tuple[ArtifactInventory, list[LogEvidence], list[str]]:
    if not root.exists():
        raise TargetNotFound(f"no file or directory at {root}")
    inv = artifact_collector.inventory(root)
    notes: list[str] = list(inv.notes)
    candidates = [root / rel for rel in inv.logs]
    candidates = [c for c in candidates if str(c) not in exclude]
    notes += [f"{c.name} skipped: not a regular file (FIFO, socket, device or dangling link); it was not opened"
              for c in candidates if not c.is_file()]
    candidates = [c for c in candidates if c.is_file()]
    candidates.sort(key=lambda c: c.stat().st_mtime if c.exists() else 0.0, reverse=True)
    if len(candidates) > MAX_LOGS:
        notes.append(f"{len(candidates)} logs in {root}; the {MAX_LOGS} newest were scanned")
        candidates = candidates[:MAX_LOGS]
    logs = []
    for c in candidates:
        try:
            logs.append(scan.scan_log(c, source=str(c), last=req.last, task=req.task, engine=req.engine, progress=progress))
        except InputError as e:
            notes.append(str(e))
    if not candidates:
        notes.append(f"no log files found in {root} (looked for *.log, *.out, *.err, stdout/stderr, nohup.out)")
    return inv, logs, notes


def _framework(req: DiagnoseRequest, logs: list[LogEvidence], target_kind: str) -> tuple[Framework, str, str | None]:
    if req.framework is not None:
        return req.framework, "given", None
    if target_kind == TargetKind.VERTEX_PIPELINE:  # the platform that ran the job names it, as in a log (engine/read/frameworks.py)
        return Framework.VERTEX, "detected", None
    fw, detail = frameworks.decide(logs)
    if fw == "unknown":
        return Framework.UNKNOWN, "unknown", None
    return Framework(fw), "detected", detail


def diagnose(req: DiagnoseRequest, progress: Progress | None = None, risk_of: RiskOf = builtin_risk) -> Diagnosis:
    """A run directory of several attempts, or a log a launcher restarted into, is also read attempt by attempt
    (engine/attempts.py), for the repeat rule; anything else at once.

    `risk_of` rates each fix: the faces pass their loaded policy's, so the report says what `request_action` enforces.
    """
    from ml_skills.engine import attempts

    reset_redaction_count()
    with paths.scope(*_local_paths(req)):
        if req.kind() is TargetKind.DIRECTORY and (found := attempts.of_run(req.target)) is not None:
            return attempts.diagnose(req, found, progress, risk_of)
        ev = collect(req, progress)
        d = analyse(req, ev, risk_of)
        if (inside := attempts.of_log(req, ev)) is not None:
            d = attempts.with_log_attempts(req, d, inside, risk_of)
        return d


def _next_commands(req: DiagnoseRequest, ev: Evidence, cls: Classification, all_logs: list[LogEvidence],
                   facts: list[RunFact], commands: list[str], fixes: list[Fix]) -> list[str]:
    """The plan's commands, then a collector's for its own source (the failed task's log, the service account's
    roles), then those the evidence fills in; each one line, as are the fixes' commands: a name from the run never
    adds a line to a command a person pastes."""
    out = list(dict.fromkeys(commands))
    out += [redact(c) for s in ev.sources for c in s.details.get("next_commands", []) if c not in out]
    log_target = req.target if req.kind() is TargetKind.LOG and ev.artifacts is None else None
    out += [c for c in diagnostic_commands(cls, all_logs, facts, log_target) if c not in out]
    for f in fixes:
        if f.command:
            f.command = pasteable(f.command)
    return list(dict.fromkeys(pasteable(c) for c in out))


def analyse(req: DiagnoseRequest, ev: Evidence, risk_of: RiskOf = builtin_risk) -> Diagnosis:
    logs = ev.logs
    src_logs = [scan.scan_text("\n".join(s.lines), source=f"{s.kind}:{s.name}", last=req.last, task=req.task) for s in ev.sources if s.lines]
    metric_logs = [scan.from_metrics(s.metrics, source=f"{s.kind}:{s.name}", task=req.task) for s in ev.sources if s.metrics]
    all_logs = logs + src_logs + metric_logs
    ranks.drop_stalls_of_ended_run(all_logs)
    if ev.artifacts is not None and (limit := launchlimit.time_limit(ev.artifacts.launch_command, ev.artifacts.launch_file, logs)):
        next(log for log in logs if log.source == limit.source).trajectory.anomalies.append(limit)
    cls, signals = classify(all_logs, ev.sources)
    ranks.keep_silent_rank_open(cls, all_logs, signals)
    framework, fw_source, fw_detail = _framework(req, all_logs, ev.target_kind)
    status = run_status(cls, signals, all_logs, ev.sources)
    cls, status, signals, fresh = resumed_from_scratch(cls, status, signals, all_logs)
    cls, survived_by = outlived(cls, status, signals, all_logs)
    clean = completed_clean(cls, status, all_logs, ev.sources) or survived_by is not None
    insufficient = None if clean else insufficient_evidence(cls, logs, ev.sources, signals)
    inv = ev.artifacts
    launch = inv.launch_command if inv else None
    facts = run_facts(all_logs, launch)
    fixes, commands = plan(cls, signals, all_logs, inv, launch, risk_of=risk_of, completed_clean=clean, facts=facts, sources=ev.sources)
    decision, why = decide(cls, fixes, insufficient, completed_clean=clean)
    root = explain.root_cause(cls, signals, all_logs)
    root.contributing = contributing_facts(cls.primary, facts) + root.contributing
    if survived_by is not None or fresh:
        root.root = cls.reasons[-1]
    findings = explain.findings(fixes, cls, root)
    if (mf := explain.missing_artifacts(inv, status, cls, all_logs, alive(ev.sources))) is not None:
        findings.insert(1, mf)
    excerpt = None
    if cls.decisive is not None:
        scanned = next((l for l in logs if l.source == cls.decisive.source), None)
        if scanned is not None and Path(scanned.source).is_file():
            excerpt = excerpts.excerpt_around(scanned, cls.decisive.line_no, 20, 20)
        else:
            excerpt = next((excerpts.excerpt_from_tail(l, cls.decisive.line_no) for l in all_logs if l.source == cls.decisive.source), None)
    conf_level = Level.HIGH if cls.confidence >= 0.75 else Level.MEDIUM if cls.confidence >= 0.5 else Level.LOW
    next_cmds = _next_commands(req, ev, cls, all_logs, facts, commands, fixes)
    anomalies = [a for l in all_logs for a in l.trajectory.anomalies]
    series = [s for l in all_logs for s in l.trajectory.series]
    last_progress = next((l.trajectory.last_progress for l in reversed(all_logs) if l.trajectory.last_progress), None)
    report_lines = [redact(x) for s in ev.sources for x in s.report_lines]
    sources = [f"{l.source} ({l.status.value}, {l.total_lines} lines)" for l in logs] + [f"{s.kind}:{s.name} ({s.status.value})" for s in ev.sources]
    d = Diagnosis(
        tool=ToolInfo(version=__version__),
        created_at=datetime.now(UTC),
        target=redact_in_line(ev.target),  # a path: not masked whole as a key line (fourteenth round)
        target_kind=ev.target_kind,
        framework=framework,
        framework_source=fw_source,
        framework_detail=fw_detail,
        task=req.task,
        run_status=status,
        primary_cause=cls.primary,
        primary_cause_confidence=cls.confidence,
        confidence_basis=cls.evidence_kind,
        confidence=conf_level,
        contributing_factors=cls.contributing,
        ruled_out=cls.ruled_out,
        evidence=explain.evidence(cls, signals, all_logs, ev.sources, inv) + [EvidenceItem(kind="note", text=redact(n)) for n in ev.notes],
        decisive_excerpt=excerpt,
        root_cause=root,
        fixes=fixes,
        findings=findings,
        decision=decision,
        decision_reason=why,
        next_commands=next_cmds,
        facts=facts,
        insufficient_evidence=insufficient,
        last_progress=last_progress,
        trajectory=series,
        anomalies=anomalies,
        artifacts=inv,
        report_lines=report_lines,
        sources=sources + ev.notes,
    )
    d = redact_value(d)  # last guard: paths and sources too (a token can sit in a directory name)
    d.redactions = redaction_count()
    return d
