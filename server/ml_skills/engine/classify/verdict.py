"""Weigh every signal and pick one primary failure class, with confidence and what was ruled out.

A signal is a signature hit, the final exception of a traceback, a trajectory anomaly or a
collector's finding. Its weight comes from its role in a cascade (a cause outweighs a symptom,
a hint only tilts), its severity, and where it sits: an error after which training went on was
survived and counts little; the first cause after the last progress is the likely root. The
class of a traceback comes first from a critical signature on its line, then from where it
was raised (a TypeError inside save_model is a checkpoint failure), then from its type.

The signals come from collect.py (whether the run went on past each: terminal.py), the cascade rules that
reweigh them from cascades.py; this module scores the classes and names the verdict.
"""

from __future__ import annotations

from ml_skills.engine.analyse.stops import CONFIDENCE_CAP
from ml_skills.engine.classify import ruled as losing
from ml_skills.engine.classify.cascades import (
    after_the_teardown,
    anomalies_below_the_ending,
    external_kill,
    generic_after_specific,
    generic_signatures,
    lead_the_ending,
    native_crash_at_exit,
    numeric_before_crash,
    own_error_before_a_kill,
    peers_follow_a_death,
    stall_before_a_stop,
    stopped_going_nowhere,
)
from ml_skills.engine.classify.collect import collect_signals
from ml_skills.engine.classify.confidence import confidence as verdict_confidence
from ml_skills.engine.classify.confidence import evidence_kind
from ml_skills.engine.classify.kills import kills_explained
from ml_skills.engine.classify.signals import MIN_PRIMARY, Signal
from ml_skills.engine.classify.terminal import clean_retry_start, progress_after
from ml_skills.engine.classify.warninglines import damp_warnings, warning_before_a_lost_error
from ml_skills.models import Classification, FailureClass, LineRef, LogEvidence, Role, RuledOut, SourceEvidence

CONFUSABLE: dict[FailureClass, list[FailureClass]] = {
    FailureClass.NCCL_DISTRIBUTED: [FailureClass.OOM, FailureClass.PROCESS_CRASH, FailureClass.STALLED, FailureClass.CUDA_RUNTIME],
    FailureClass.OOM: [FailureClass.PROCESS_CRASH, FailureClass.DATA_PIPELINE],
    FailureClass.PROCESS_CRASH: [FailureClass.OOM, FailureClass.CUDA_RUNTIME],
    FailureClass.NAN_INF: [FailureClass.OPTIMIZATION_DIVERGENCE, FailureClass.DATA_PIPELINE],
    FailureClass.OPTIMIZATION_DIVERGENCE: [FailureClass.NAN_INF, FailureClass.DATA_PIPELINE],
    FailureClass.CUDA_RUNTIME: [FailureClass.OOM, FailureClass.DATA_PIPELINE],
    FailureClass.DATA_PIPELINE: [FailureClass.IO_CHECKPOINT, FailureClass.CONFIG_ERROR, FailureClass.OOM],
    FailureClass.CONFIG_ERROR: [FailureClass.DATA_PIPELINE, FailureClass.IO_CHECKPOINT],
    FailureClass.IO_CHECKPOINT: [FailureClass.CONFIG_ERROR, FailureClass.DATA_PIPELINE],
    FailureClass.STALLED: [FailureClass.NCCL_DISTRIBUTED, FailureClass.DATA_PIPELINE, FailureClass.PROCESS_CRASH],
    FailureClass.EVALUATION_MISMATCH: [FailureClass.DATA_PIPELINE, FailureClass.OPTIMIZATION_DIVERGENCE],
    FailureClass.PIPELINE_ORCHESTRATION: [FailureClass.CLOUD_PERMISSIONS_QUOTA, FailureClass.CONFIG_ERROR],
    FailureClass.CLOUD_PERMISSIONS_QUOTA: [FailureClass.PIPELINE_ORCHESTRATION, FailureClass.CONFIG_ERROR],
}


def _class_scores(signals: list[Signal]) -> tuple[dict[FailureClass, float], dict[FailureClass, list[Signal]]]:
    """Each class's score (its strongest signal, plus a quarter of its next five) and its signals."""
    scores: dict[FailureClass, float] = {}
    by_class: dict[FailureClass, list[Signal]] = {}
    for s in signals:
        by_class.setdefault(s.failure_class, []).append(s)
    for cls, sig in by_class.items():
        ws = sorted((s.weight for s in sig), reverse=True)
        scores[cls] = ws[0] + 0.25 * sum(ws[1:6])
    return scores, by_class


def _went_on_past(ranked: list[tuple[FailureClass, float]], by_class: dict[FailureClass, list[Signal]],
                  logs: list[LogEvidence]) -> str | None:
    """How the leading class did not end the run, or None: every signal of it came before a later attempt that ran
    clean ('retried'), or is an error line training went on past with nothing anywhere that could name a class alone
    and was not survived ('trained past')."""
    if not ranked or not all(s.survived for s in by_class[ranked[0][0]]):
        return None
    if any(clean_retry_start(log) is not None for log in logs):
        return "retried"
    lead = by_class[ranked[0][0]]
    # one log with no traceback and no completion after it: across a directory's attempts, or when a later launch
    # completed, the earlier failure is the attempts' and status.outlived's to read (kept there as contributing); an
    # uncaught exception ends its process, and step lines after it are its stdout buffer flushed at exit
    if len(logs) == 1 and not logs[0].tracebacks and "completed-marker" not in logs[0].frameworks and all(s.kind in ("signature", "traceback") for s in lead) and all(
            s.survived or s.role is Role.HINT or s.kind == "stop" or s.weight < MIN_PRIMARY for sigs in by_class.values() for s in sigs):
        return "trained past"
    return None


def _abstain(scores: dict[FailureClass, float], ranked: list[tuple[FailureClass, float]], notes: list[str]) -> Classification:
    """No class named: every class is ruled out for too little evidence."""
    return Classification(
        primary=None, confidence=0.0, scores={k.value: round(v, 3) for k, v in scores.items()},
        ruled_out=[RuledOut(failure_class=c, reason=f"too little evidence (score {v:.2f})") for c, v in ranked],
        reasons=["no signal strong enough to name a failure class"] + notes,
    )


def _verdict_confidence(decisive: Signal, primary_signals: list[Signal]) -> tuple[str, float]:
    """(evidence kind, confidence): how often verdicts resting on this kind of evidence were right on logs the engine
    had not been tuned on; capped when only where the log stops says it hung."""
    kind = evidence_kind(decisive.kind, decisive.label, decisive.role)
    confidence = verdict_confidence(kind, decisive.label)
    if all(s.kind == "stop" or s.role is Role.HINT for s in primary_signals) or decisive.inferred:  # a hint beside it proves nothing more
        confidence = min(confidence, CONFIDENCE_CAP)
    return kind, confidence


# readings of what the run's configuration states, not trends to weigh: whatever ended the run, they held
_STATED = frozenset({"eval-on-train-data"})


def _the_other_classes(ranked: list[tuple[FailureClass, float]], by_class: dict[FailureClass, list[Signal]],
                       logs: list[LogEvidence], decisive: Signal, psigs: list[Signal]) -> tuple[list[FailureClass], list[RuledOut]]:
    """Each class after the primary: contributing, or ruled out with the reason it lost; then the primary's usual
    confusions that showed no signal at all, ruled out for that."""
    primary, top = ranked[0]
    decisive_line = decisive.line_no or 0
    contributing: list[FailureClass] = []
    ruled: list[RuledOut] = []
    retry = {log.source: clean_retry_start(log) for log in logs}
    generic = generic_signatures()
    for cls, score in ranked[1:]:
        sig = sorted(by_class[cls], key=lambda s: (-s.weight, s.line_no or 0))
        best = sig[0]
        if all(s.survived for s in sig):
            went_on = next((progress_after(log, best.line_no) for log in logs if log.source == best.source and best.line_no), None)
            ruled.append(RuledOut(failure_class=cls, reason=losing.survived(best, went_on, retry.get(best.source))))
        elif all(s.warning for s in sig):
            ruled.append(RuledOut(failure_class=cls, reason=losing.warned(best, decisive)))
        elif all(s.source == decisive.source and (s.line_no or 0) > decisive_line for s in sig) and all(s.role is not Role.CAUSE or s.kind == "traceback" for s in sig):
            ruled.append(RuledOut(failure_class=cls, reason=losing.follows(best, decisive)))
        elif decisive.role is Role.CAUSE and all(s.role is Role.SYMPTOM for s in sig):
            ruled.append(RuledOut(failure_class=cls, reason=losing.symptom(best, decisive)))
        elif (score >= 0.35 * top and any(s.role is Role.HINT or s.kind == "anomaly" for s in sig)) or \
                any(s.label in _STATED for s in sig):
            contributing.append(cls)
        else:
            ruled.append(RuledOut(failure_class=cls, reason=losing.weaker(best, sig, decisive, primary, psigs, generic, score, top)))
    seen = {primary, *contributing, *(r.failure_class for r in ruled)}
    for cls in CONFUSABLE.get(primary, []):
        if cls not in seen:
            ruled.append(RuledOut(failure_class=cls, reason=losing.no_signal(cls)))
    return contributing, ruled


def classify(logs: list[LogEvidence], sources: list[SourceEvidence] | None = None) -> tuple[Classification, list[Signal]]:
    """Weigh the signals (cascade rules, the ending's lead, damped warnings), score each class, and name the
    primary with its confidence, the contributing classes and why each other one was ruled out."""
    signals = collect_signals(logs, sources)
    generic_after_specific(signals)
    lead_the_ending(signals, logs)
    damp_warnings(signals)
    numeric_before_crash(signals)
    anomalies_below_the_ending(signals)
    stall_before_a_stop(signals)
    stopped_going_nowhere(signals)
    peers_follow_a_death(signals)
    own_error_before_a_kill(signals)
    after_the_teardown(signals)
    kills_explained(signals)
    native_crash_at_exit(signals, logs)
    warning_before_a_lost_error(signals, logs)
    notes = external_kill(signals, logs)

    scores, by_class = _class_scores(signals)
    ranked = sorted(scores.items(), key=lambda t: -t[1])
    past = _went_on_past(ranked, by_class, logs)
    if past == "retried":
        notes.append(f"{ranked[0][0].value} came before a later attempt that ran without error: the run went on past it")
    elif past:
        notes.append(f"{ranked[0][0].value}: training went on past every line of it, so it did not end the run")
    if not ranked or ranked[0][1] < MIN_PRIMARY or past:
        return _abstain(scores, ranked, notes), signals
    primary = ranked[0][0]
    psigs = sorted(by_class[primary], key=lambda s: (-s.weight, s.line_no or 0))
    decisive = psigs[0]
    kind, confidence = _verdict_confidence(decisive, by_class[primary])
    contributing, ruled = _the_other_classes(ranked, by_class, logs, decisive, psigs)

    reasons = [f"{decisive.kind} {decisive.label}: {decisive.text[:200]}"]
    reasons += [f"also {s.kind} {s.label} at line {s.line_no}" for s in psigs[1:4]]
    reasons += notes
    return Classification(
        primary=primary,
        confidence=confidence,
        evidence_kind=kind,
        contributing=contributing,
        ruled_out=ruled,
        scores={k.value: round(v, 3) for k, v in ranked},
        decisive=LineRef(source=decisive.source, line_no=decisive.line_no, text=decisive.text[:500]) if decisive.line_no else None,
        reasons=reasons,
    ), signals
