"""The diagnosis in words: the root cause (proximate line, meaning, first rank), the evidence list, the findings,
and the missing-checkpoint finding. Moved out of pipeline.py so the pipeline reads as its stages."""

from __future__ import annotations

import re
from pathlib import Path

from ml_skills.catalog.loader import signatures
from ml_skills.engine.analyse import ranks
from ml_skills.engine.analyse.stops import meaning as stop_meaning
from ml_skills.engine.classify.cascades import EXTERNAL_KILL
from ml_skills.engine.classify.collect import around_match
from ml_skills.engine.classify.signals import Signal
from ml_skills.engine.classify.status import fmt_number
from ml_skills.engine.read import excerpts
from ml_skills.models import (
    ArtifactInventory,
    Classification,
    EvidenceItem,
    FailureClass,
    Finding,
    FindingSeverity,
    Fix,
    Level,
    LineRef,
    LogEvidence,
    RootCause,
    RunStatus,
    SourceEvidence,
)


def root_cause(cls: Classification, signals: list[Signal], logs: list[LogEvidence]) -> RootCause:
    if cls.primary is None or cls.decisive is None:
        return RootCause(proximate="no failing line identified", root="unknown: the evidence names no failure", contributing=[])
    d = cls.decisive
    assert d.line_no is not None
    # proximate: where execution stopped - the first exception of the primary class after progress
    stops = [s for s in signals if s.failure_class == cls.primary and not s.survived and s.line_no and s.kind in ("traceback", "signature") and s.role.value == "cause"]
    if stops:
        tb = [s for s in stops if s.kind == "traceback"]
        first = min(tb or stops, key=lambda s: s.line_no or 0)
        if first.line_no and first.line_no >= d.line_no:
            d = LineRef(source=first.source, line_no=first.line_no, text=first.text[:500])
    # a long line is quoted around what matched, so the proximate cause holds its decisive words (Ray's memory monitor
    # names the node and the task for 250 characters before 'exceeds the memory usage threshold')
    at = next((s.label for s in signals if s.kind == "signature" and s.line_no == d.line_no and s.source == d.source
               and s.failure_class == cls.primary), None)
    quote = around_match(d.text, at, 240) if at else d.text
    proximate = f"{Path(d.source).name}:{d.line_no}: {quote if quote is not d.text else d.text[:240]}"
    if excerpts.LINE_QUOTE in d.text:  # a metric anomaly: the line itself is where it happened, the finding follows
        finding, line = d.text.split(excerpts.LINE_QUOTE, 1)
        proximate = f"{Path(d.source).name}:{d.line_no}: {line[:240]} ({finding[:200]})"
    sig = {s.id: s for s in signatures()}
    best = sorted((s for s in signals if s.failure_class == cls.primary), key=lambda s: -s.weight)
    meaning = ""
    for s in best:
        if s.kind == "signature" and s.label in sig:
            meaning = sig[s.label].meaning
            break
        if s.label == EXTERNAL_KILL:
            meaning = ("The process was killed with SIGKILL from outside while its logged memory stayed flat: a scheduler, "
                       "a preemption, a watchdog or a person, not the kernel OOM killer.")
            break
        if s.kind in ("anomaly", "source"):
            meaning = s.text
            break
        if s.kind == "stop":  # how the log ends (stops.py)
            meaning = stop_meaning(s.label)
            break
        if s.kind == "traceback":
            meaning = _traceback_meaning(s)
            break
    root = meaning or f"{cls.primary.value} failure"
    desync = ranks.collective_desync(logs) if cls.primary is FailureClass.NCCL_DISTRIBUTED else ""
    first_fail = ranks.first_failing(logs, signals)
    # when every rank only timed out, which one printed first is a few milliseconds of ordering, not a cause
    rank_note = "" if desync and first_fail is not None and first_fail[0].kind == "symptom" else _first_rank(logs, signals)
    if rank_note:
        root += " " + rank_note
    if desync:
        root += " " + desync
    if (rank_note or desync) and (per_rank := ranks.progress_by_rank(logs)):
        root += " " + per_rank
    contributing = []
    for c in cls.contributing:
        top = next((x for x in sorted(signals, key=lambda x: -x.weight) if x.failure_class is c), None)
        if top:
            contributing.append(f"{c.value}: {top.text[:160]}" + (f" (line {top.line_no})" if top.line_no else ""))
    return RootCause(proximate=proximate, proximate_line=d, root=root, contributing=contributing)


def _traceback_meaning(s: Signal) -> str:
    from ml_skills.catalog.loader import exception_rules

    rid = s.label.split(":", 1)[-1]
    rule = next((r for r in exception_rules() if r.id == rid), None)
    if rule:
        return f"{rule.meaning} ({s.text[:200]})"
    sig = next((x for x in signatures() if x.id == rid), None)
    return f"{sig.meaning} ({s.text[:200]})" if sig else s.text[:200]


def _first_rank(logs: list[LogEvidence], signals: list[Signal]) -> str:
    """With several logs (ranks), say which failed first (engine/analyse/ranks.py)."""
    return ranks.describe(logs, signals)


def _run_end_line(log: LogEvidence) -> tuple[int, str] | None:
    """The line the scan read as the run's end (a completion message, the last epoch of its total, a final
    result), quoted from the log's tail, so that a 'completed' status shows what it rests on."""
    n = log.frameworks.get("completed-marker")
    if n is None or log.tail is None or not log.tail.start_line <= n < log.tail.start_line + len(log.tail.lines):
        return None
    return n, log.tail.lines[n - log.tail.start_line].strip()


_BAR_RUN = re.compile(r"([\u2580-\u259f#])\1{11,}")  # a progress bar's blocks (tqdm's, or its ASCII '#')


def _bars_folded(text: str) -> str:
    """The line with each long run of one progress-bar block folded to three and `…`: a tqdm bar glued before an error
    filled the evidence's 300 characters (900 bytes of blocks) and left the error out (2390)."""
    return _BAR_RUN.sub(lambda m: m.group(1) * 3 + "\u2026", text)


_FRAME = re.compile(r"\s*frame #\d+: ")  # a line of a C++ backtrace (c10's, the NCCL watchdog's)
EVIDENCE_CHARS = 300  # of a line quoted as evidence (the decisive excerpt shows the lines whole)
FRAME_CHARS = 160


def evidence(cls: Classification, signals: list[Signal], logs: list[LogEvidence], sources: list[SourceEvidence], inv: ArtifactInventory | None) -> list[EvidenceItem]:
    items: list[EvidenceItem] = []
    seen = set()
    framed: set[str] = set()  # labels a frame of a C++ backtrace was quoted for
    for s in sorted(signals, key=lambda s: (s.failure_class != cls.primary, -s.weight))[:10]:
        key = (s.source, s.line_no) if s.line_no else (s.source, s.label)
        frame = _FRAME.match(s.text) is not None
        if key in seen or (frame and s.label in framed):
            continue  # the next frames of one backtrace say nothing new (2390: four of ten items were frames)
        seen.add(key)
        if frame:
            framed.add(s.label)
        tag = "" if s.failure_class == cls.primary else f" [{s.failure_class.value}{', survived' if s.survived else ''}]"
        quote = _bars_folded(s.text)[: FRAME_CHARS if frame else EVIDENCE_CHARS]  # a frame's library path says little
        items.append(EvidenceItem(kind=s.kind, text=f"{s.label}{tag}: {quote}", source=s.source, line_no=s.line_no))
    for log in logs:
        lp = log.trajectory.last_progress
        end = _run_end_line(log)
        if lp:
            when = f" at {lp.time:%Y-%m-%d %H:%M:%S}" if lp.time else ""
            at = f"step {fmt_number(lp.step)}" if lp.step is not None else f"line {lp.line_no}"
            what = "last progress, read as the run's end" if end is not None and end[0] == lp.line_no else "last progress"
            quoted = (log.source, lp.line_no) in seen  # its line is quoted above as a signal's: not twice
            shown = "its line is quoted above" if quoted else _bars_folded(lp.text)[:160]
            items.append(EvidenceItem(kind="progress", text=f"{what}: {at}{when}: {shown}", source=log.source, line_no=lp.line_no))
        if end is not None and (lp is None or end[0] != lp.line_no):
            items.append(EvidenceItem(kind="progress", text=f"run end: line {end[0]}: {end[1][:160]}", source=log.source, line_no=end[0]))
        for p in log.problems:
            items.append(EvidenceItem(kind="note", text=p, source=log.source))
    for src in sources:
        for k, v in list(src.facts.items())[:8]:
            items.append(EvidenceItem(kind="source", text=f"{k}: {v}", source=src.name))
        for m in src.missing:
            items.append(EvidenceItem(kind="note", text=f"missing: {m}", source=src.name))
    if inv is not None:
        n_valid = sum(c.valid for c in inv.checkpoints)
        items.append(EvidenceItem(kind="artifact", text=(f"{len(inv.checkpoints)} checkpoint(s), {n_valid} valid; newest valid: "
                                                          f"{inv.newest_valid_checkpoint or 'none'}; {len(inv.configs)} config(s), {len(inv.logs)} log(s)"),
                                  source=inv.root))
        for c in inv.checkpoints:
            if not c.valid:
                items.append(EvidenceItem(kind="artifact", text=f"invalid checkpoint {c.path}: {c.reason}", source=inv.root))
    return items


def findings(fixes: list[Fix], cls: Classification, root: RootCause) -> list[Finding]:
    out = []
    if cls.primary is not None:
        out.append(Finding(severity=FindingSeverity.BLOCKER, title=f"{cls.primary.value}: {root.proximate[:120]}", detail=root.root[:500]))
    for f in fixes:
        sev = FindingSeverity.BLOCKER if f.expected_impact is Level.HIGH and f.rank == 1 else (
            FindingSeverity.HIGH if f.expected_impact is not Level.LOW else FindingSeverity.MEDIUM)
        out.append(Finding(severity=sev, title=f.action[:160], detail=f"risk={f.risk.value}; validate: {f.validation}"))
    return out


def missing_artifacts(inv: ArtifactInventory | None, status: RunStatus, cls: Classification, logs: list[LogEvidence],
                       live: bool) -> Finding | None:
    """A run that trained, then died with no checkpoint in its output directory: it saved too late.

    Not for a run that never trained (it failed at start-up: no save was due yet), nor when saving
    itself failed (io-checkpoint is then the primary cause: writing is what is broken), nor for a run a
    process or pipeline shows alive. A log that merely ends mid-training (read as running) may be a run
    killed without a word, so its empty output directory is still said.
    """
    if inv is None or inv.checkpoints or status is RunStatus.COMPLETED or (status is RunStatus.RUNNING and live):
        return None
    if cls.primary is FailureClass.IO_CHECKPOINT:
        return None
    lp = next((l.trajectory.last_progress for l in logs if l.trajectory.last_progress and l.trajectory.last_progress.step), None)
    if lp is None:
        return None
    return Finding(
        severity=FindingSeverity.HIGH,
        title="no checkpoint was written before the run ended",
        detail=(f"the run trained to step {fmt_number(lp.step)} ({Path(lp.source).name}:{lp.line_no}) and left no checkpoint in "
                f"{inv.root}: writing happened too late (only at the end), not that writing is broken. Save periodically "
                "(every N steps) and on failure (an exception or SIGTERM handler), so a killed run loses minutes, not the run."),
    )
