"""A run directory of several attempts, as check-failed-run reads it: each alone, then the repeat rule.

A relaunched run leaves its attempts side by side (attempt-1/ and attempt-2/, train.log and
train.retry1.log, collectors/attempts.py). Read together they look like two ranks of one job;
read apart, each is one launch with its own failure and progress. The newest attempt's diagnosis
is the report; the earlier ones are diagnosed only to be compared with it (engine/plan/repeat.py), the
same way triage-runs reads a relaunched cell.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ml_skills.collectors import artifacts as artifact_collector
from ml_skills.collectors.attempts import REPORT_END, attempts_of, log_attempts
from ml_skills.engine.plan import repeat
from ml_skills.errors import MLSkillsError
from ml_skills.models import AttemptBrief, Diagnosis, Evidence, EvidenceItem, Outcome, Progress, RiskOf, builtin_risk
from ml_skills.safety.redact import redact, redact_value
from ml_skills.targets import TargetKind

_REPORT_END = re.compile(REPORT_END)
LAUNCHER_LINES = "launcher-child-failed"
"""The catalog signature that matches torchelastic's per-failure line (and its ChildFailedError)."""

if TYPE_CHECKING:
    from ml_skills.engine.pipeline import DiagnoseRequest


def of_log(req: DiagnoseRequest, ev: Evidence) -> tuple[str, list[tuple[int, int, str]]] | None:
    """The log a launcher restarted its workers into and its attempts (collectors/attempts.py), oldest first; None
    unless the target is that log, or a run directory whose only log it is."""
    kind = req.kind()
    if kind not in (TargetKind.LOG, TargetKind.DIRECTORY) or len(ev.logs) != 1 or not Path(ev.logs[0].source).is_file():
        return None
    log = ev.logs[0]
    # the scan already found the launcher's lines, or the tail shows two job reports: a log without either is not read again
    reports = sum(1 for x in (log.tail.lines if log.tail else []) if _REPORT_END.match(x))
    if not any(h.signature_id == LAUNCHER_LINES for h in log.hits) and reports < 2:
        return None
    path = log.source
    try:
        found = log_attempts(path, keep=req.last)
    except (OSError, MLSkillsError):
        return None  # the whole-log diagnosis says what is wrong with the file
    return (path, found) if found else None


def with_log_attempts(req: DiagnoseRequest, d: Diagnosis, inside: tuple[str, list[tuple[int, int, str]]],
                      risk_of: RiskOf = builtin_risk) -> Diagnosis:
    """The whole log's diagnosis (its line numbers, its excerpt), with each attempt read alone for the repeat rule."""
    from ml_skills.engine.pipeline import analyse
    from ml_skills.engine.read import scan

    path, attempts = inside
    briefs = []
    for n, first, text in attempts:
        where = f"{path} lines {first}-{first + text.count(chr(10))}"
        log = scan.scan_text(text, source=where, last=req.last, task=req.task)
        ev = Evidence(target=where, target_kind=TargetKind.LOG, collected_at=datetime.now(UTC), logs=[log])
        briefs.append(repeat.brief_of(n, where, analyse(req.model_copy(update={"target": None, "traceback_text": text}), ev, risk_of), [log]))
    d = repeat.apply(d, briefs)
    _say(d, briefs, f"a log of {len(attempts)} attempts (a launcher's restarts, or resubmitted jobs appended to one file): the "
                    "report reads the whole log; each attempt was also diagnosed alone to compare them")
    return redact_value(d)


def of_run(req_target: str | None) -> list[tuple[int, str]] | None:
    """The attempts of a run directory, oldest first; None when it holds one launch."""
    if not req_target or not Path(req_target).is_dir():
        return None
    try:
        found = attempts_of(req_target)
    except OSError:
        return None
    return found if len(found) > 1 else None


def diagnose(req: DiagnoseRequest, attempts: list[tuple[int, str]], progress: Progress | None = None,
             risk_of: RiskOf = builtin_risk) -> Diagnosis:
    """The newest attempt's diagnosis, with every attempt's brief and the repeat rule applied."""
    from ml_skills.engine.pipeline import analyse, collect

    run_dir = req.target or "."
    inv = artifact_collector.inventory(run_dir)  # what a relaunch resumes from is the run's, whichever attempt wrote it
    briefs: list[AttemptBrief] = []
    notes: list[str] = []
    d: Diagnosis | None = None
    for i, (n, path) in enumerate(attempts):
        newest = i == len(attempts) - 1
        sub = req.model_copy(update={"target": path, "artifacts": req.artifacts if newest else None})
        try:
            ev = collect(sub, progress)
            if sub.artifacts is None:
                ev.artifacts = inv
            one = analyse(sub, ev, risk_of)
        except MLSkillsError as e:
            if newest:
                raise
            briefs.append(AttemptBrief(attempt=n, outcome=Outcome.UNREADABLE, fingerprint=None, last_step=None, path=path))
            notes.append(f"attempt {n} ({path}) could not be read: {e}")
            continue
        briefs.append(repeat.brief_of(n, path, one, ev.logs))
        d = one
    assert d is not None
    d = repeat.apply(d, briefs)
    names = ", ".join(f"{n} ({Path(p).name})" for n, p in attempts)
    _say(d, briefs, f"a run of {len(attempts)} attempts ({names}): the newest is the one diagnosed here; each earlier one was "
                    "diagnosed alone to compare with it")
    d.evidence += [EvidenceItem(kind="note", text=n) for n in notes]
    d.target, d.target_kind = run_dir, TargetKind.DIRECTORY
    return redact_value(d)


def _say(d: Diagnosis, briefs: list[AttemptBrief], note: str) -> None:
    d.report_lines = [*d.report_lines, f"Attempts: {len(briefs)}, oldest first: " + "; ".join(_line(b) for b in briefs)]
    if d.repeat is not None:
        d.report_lines.append(f"Relaunch ({d.repeat.kind.value}): {d.repeat.reason}")
    d.evidence.append(EvidenceItem(kind="note", text=note))


def _line(b: AttemptBrief) -> str:
    step = f" at step {b.last_step:g}" if b.last_step is not None else ""
    fp = f" [{b.fingerprint}]" if b.fingerprint else ""
    return redact(f"attempt {b.attempt} {b.outcome.value}{step}{fp}")
