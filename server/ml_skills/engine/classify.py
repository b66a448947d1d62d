"""Weigh every signal and pick one primary failure class, with confidence and what was ruled out.

A signal is a signature hit, the final exception of a traceback, a trajectory anomaly or a
collector's finding. Its weight comes from its role in a cascade (a cause outweighs a symptom,
a hint only tilts), its severity, and where it sits: an error after which training went on was
survived and counts little; the first cause after the last progress is the likely root. The
class of a traceback comes first from a critical signature on its line, then from where it
was raised (a TypeError inside save_model is a checkpoint failure), then from its type.
"""

from __future__ import annotations

import math
import re
from functools import cache

from ml_skills.catalog.loader import signatures
from ml_skills.collectors.attempts import REPORT_END
from ml_skills.engine import ruled as losing
from ml_skills.engine.cascades import (
    anomalies_below_the_ending,
    generic_after_specific,
    generic_signatures,
    numeric_before_crash,
    peers_follow_a_death,
)
from ml_skills.engine.confidence import confidence as verdict_confidence
from ml_skills.engine.confidence import evidence_kind
from ml_skills.engine.exceptions import callers_of_chained, traceback_class
from ml_skills.engine.metrics import parse_line
from ml_skills.engine.signals import MIN_PRIMARY, ROLE_W, Signal
from ml_skills.engine.stops import CONFIDENCE_CAP, stop_signals
from ml_skills.lazyre import lazy
from ml_skills.models import (
    Anomaly,
    Classification,
    FailureClass,
    LineRef,
    LogEvidence,
    Role,
    RuledOut,
    Severity,
    SignatureHit,
    SourceEvidence,
)

SEV_W = {Severity.CRITICAL: 1.0, Severity.SIGNIFICANT: 0.7, Severity.MINOR: 0.4, Severity.INFO: 0.2}
ANOMALY_W = {Severity.CRITICAL: 3.2, Severity.SIGNIFICANT: 2.0, Severity.MINOR: 0.8, Severity.INFO: 0.3}
TRACEBACK_W = 2.6
SURVIVED = 0.3
WARNING_DAMP = 0.3
# An error counts as survived only if training went on for this many progress lines after it:
# a DataLoader still hands out the batches its other workers prefetched (2 per worker) after
# one worker dies, and loggers flush late, so one or two step lines do not mean recovery.
SURVIVED_MIN_PROGRESS = 3
EXTERNAL_KILL = "sigkill-external"
LIVE_STATES = ("running", "sleeping", "pipeline_state_running")
QUOTE_WIDTH = 400  # a longer line is quoted around its match, so the cited text holds the decisive words
_WARNING = lazy(r"(Warning:|WARNING|\bwarn(ing)?s?\.|\[W \w|^W\d{4} |\bW\d{4} \d\d:|UserWarning|FutureWarning|DeprecationWarning|\bwarnings\.warn)")
# A line its program logged at INFO or DEBUG level: logging's '- INFO -', 'INFO:name:', '[INFO]', loguru's '| INFO |',
# glog's 'I0610 06:55:34'. The program itself judged it informational ('No checkpoint found. Initializing model from
# scratch'): it reports a choice the run made and went on from, not a failure, unless it carries an error's words
# (TF's 'INFO:tensorflow:Error reported to Coordinator', a metric line whose loss is nan).
_INFO_LEVEL = lazy(r"(^|[\s\[|(:-])(INFO|DEBUG)(\s*[\]|:-]|\s)|^[ID]\d{4} \d\d:\d\d:\d\d")
_ERROR_WORDS = lazy(r"(?i)(error|fail|exception|fatal|abort|killed|\bnan\b|\binf\b|infinity|overflow|timed? ?out|denied|refused|"
                          r"exhausted|out of memory|corrupt|illegal|segmentation|traceback|exit ?code|signal)")
_WRAPPERS = lazy(r"(RayTaskError|ChildFailedError|CalledProcessError|ProcessRaisedException|HydraException|SystemExit|TrainingFailedError|TuneError)")

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


@cache
def _logged_as_warning() -> frozenset[str]:
    """Signatures of failures that their framework reports at WARNING level (not damped)."""
    return frozenset(s.id for s in signatures() if s.logged_as_warning)


@cache
def _signature_regexes() -> dict[str, re.Pattern[str]]:
    return {s.id: lazy(s.pattern) for s in signatures()}


def _around_match(text: str, signature_id: str, width: int = QUOTE_WIDTH) -> str:
    """A long line quoted around what matched: a launcher's 900-character command line ends in its exit code."""
    if len(text) <= width:
        return text
    rx = _signature_regexes().get(signature_id)
    m = rx.search(text) if rx else None
    if m is None or m.end() <= width - 20:
        return text
    start = max(0, m.start() - (width - (m.end() - m.start())) // 2)
    return "..." + text[start : start + width]


def informational(text: str) -> bool:
    """A line logged at INFO/DEBUG level with no error in its words: never the failure that ended a run."""
    m = _INFO_LEVEL.search(text[:160])
    return m is not None and not _ERROR_WORDS.search(text[m.end():])


def _last_progress_line(log: LogEvidence) -> int | None:
    lp = log.trajectory.last_progress
    return lp.line_no if lp else None


_DIGITS = lazy(r"\d+")
RETRY_OPENING = 10
_STACKISH = lazy(r'(^\s*File "|^\s*-+>|Traceback|^\S+ in \w+\(|^\s*\d+\s+\S)')


def clean_retry_start(log: LogEvidence) -> int | None:
    """The line where a later attempt, appended to the same log after a failure, starts and then runs without error.

    A retry prints its start-up again: a non-metric line seen once before the last failure (digits, such as
    timestamps, aside) comes back once after it. If nothing fatal follows that line, the run went on past the
    earlier failure the way it goes on past a survived error (healthy 006: a Hydra error, then a second attempt
    that trained, tested and closed its loggers).
    """
    tail = log.tail
    fatal = sorted({t.line_no for t in log.tracebacks} | {h.line_no for h in log.hits if h.role is not Role.HINT})
    if tail is None or not fatal or tail.start_line > 1:
        return None
    last_fatal = fatal[-1]
    norm = [_DIGITS.sub("#", x.strip()) for x in tail.lines]
    # the log's opening lines (its first ten that say something), before any failure: what a start-up prints
    before: dict[str, int] = {}
    opening = [i for i, x in enumerate(norm) if x][:RETRY_OPENING]
    for i in opening:
        x = norm[i]
        if tail.start_line + i >= fatal[0]:
            break
        if (len(x) > 20 and not tail.lines[i][:1].isspace() and parse_line(tail.lines[i]) is None and not _ERROR_WORDS.search(x) and not _STACKISH.search(x)
                and len(re.findall(r"[A-Za-z]{3,}", x)) >= 2):
            before[x] = norm.count(x)
    for i, x in enumerate(norm):
        n = tail.start_line + i
        if n <= last_fatal:
            continue
        if before.get(x) == 2:
            # a retry runs code again; a stack printed again (a notebook's traceback, a second worker's) is no retry
            return None if any(_STACKISH.search(y) for y in tail.lines[i:]) else n
    return None


# the closing verdict of a scheduler's job report (LSF's), printed once per job: a file of several such reports holds
# several attempts, each report closing the output above it
_REPORT_END = lazy(REPORT_END)


def last_attempt_start(log: LogEvidence) -> int | None:
    """The first line of the last attempt, when the log appends several jobs' outputs each closed by its job report.

    A resubmitted job's output is appended to the same file after the first job's report; what ended the run is
    what ended the last attempt, and a failure of an earlier one (an OOM at batch 16, then a resubmission at batch
    12) is history, as a survived error is. None when the log holds one attempt (or the report is outside the tail).
    """
    tail = log.tail
    if tail is None:
        return None
    ends = [tail.start_line + i for i, x in enumerate(tail.lines) if _REPORT_END.match(x)]
    later = [e for e in ends if any(e < n for n in _fatal_lines(log))]
    return later[-1] + 1 if later else None


def _fatal_lines(log: LogEvidence) -> set[int]:
    return {t.line_no for t in log.tracebacks} | {h.line_no for h in log.hits if h.role is not Role.HINT}


def _progress_after(log: LogEvidence, line_no: int) -> tuple[int, int] | None:
    """The first and last training-progress lines after `line_no` in the log's tail: where the run went on."""
    tail = log.tail
    if tail is None:
        return None
    def progress(i: int) -> bool:
        return (p := parse_line(tail.lines[i])) is not None and (p[1] is not None or "loss" in p[0])

    after = range(max(0, line_no + 1 - tail.start_line), len(tail.lines))  # parsed from each end, not every line
    first = next((i for i in after if progress(i)), None)
    if first is None:
        return None
    return tail.start_line + first, tail.start_line + next(i for i in reversed(after) if progress(i))


def _survived(log: LogEvidence, line_no: int, last_prog: int | None) -> bool:
    """Did training make real progress after this line (not just prefetched batches)?"""
    retry = clean_retry_start(log)
    if retry is not None and line_no < retry:
        return True  # a later attempt started after it and ran without error
    attempt = last_attempt_start(log)
    if attempt is not None and line_no < attempt:
        return True  # a later attempt was launched after it: the run went on past it (and ended for its own reason)
    if last_prog is None or line_no >= last_prog:
        return False
    tail = log.tail
    if tail is None or line_no < tail.start_line:
        return True  # the error is older than the tail: far more than a few steps followed
    after = tail.lines[line_no - tail.start_line + 1 :]
    progress = 0
    for text in after:
        parsed = parse_line(text)
        # a step counter, or a training loss on a line of its own (Keras' '19/19 - 12s - loss: 0.0809' per epoch)
        if parsed is not None and (parsed[1] is not None or "loss" in parsed[0]):
            progress += 1
            if progress >= SURVIVED_MIN_PROGRESS:
                return True
    return False


def collect_signals(logs: list[LogEvidence], sources: list[SourceEvidence] | None = None) -> list[Signal]:
    signals: list[Signal] = []
    live = any((s.state or "").lower() in LIVE_STATES for s in sources or [])
    for log in logs:
        last_prog = _last_progress_line(log)
        hits_by_line: dict[tuple[str, int], list[SignatureHit]] = {}
        for h in log.hits:
            hits_by_line.setdefault((h.source, h.line_no), []).append(h)
        # Tracebacks first: where an exception was raised (its frames) outranks a generic
        # signature on its last line, e.g. a TypeError inside save_model is a checkpoint failure.
        superseded: set[tuple[str, int]] = set()
        callers = callers_of_chained(log.tracebacks)
        last_tb = max((i for i, tb in enumerate(log.tracebacks) if not _WRAPPERS.search(tb.exc_type)), default=-1)
        for i, tb in enumerate(log.tracebacks):
            if _WRAPPERS.search(tb.exc_type) or tb.message.startswith("Traceback (most recent call last)"):
                continue
            cls, rw, rule = traceback_class(callers.get(i, tb), hits_by_line)
            if cls is None:
                ending = _unclassified_ending(log, tb, i == last_tb, hits_by_line, last_prog)
                if ending is not None:
                    signals.append(ending)
                continue
            w = TRACEBACK_W * rw * (0.6 if tb.chained and not tb.exc_type.endswith(")") else 1.0)
            role = Role.CAUSE
            # an exception whose message is itself a symptom ("Connection closed by peer", a collective
            # timeout) reports another process's failure: it is a symptom, whatever raised it
            line_hits = hits_by_line.get((tb.source, tb.line_no), [])
            symptom = next((h for h in line_hits if h.role is Role.SYMPTOM), None)
            if symptom is not None and not any(h.role is Role.CAUSE for h in line_hits):
                cls, role, rule = symptom.failure_class, Role.SYMPTOM, symptom.signature_id
                w *= ROLE_W[Role.SYMPTOM] / ROLE_W[Role.CAUSE]
            # the traceback's class (decided above, after any symptom override) replaces weaker
            # signatures of other classes on its line; a signature of the same class stays
            if any(h.failure_class != cls and h.severity is not Severity.CRITICAL for h in line_hits):
                superseded.add((tb.source, tb.line_no))
            survived = _survived(log, tb.line_no, last_prog)
            if survived:
                w *= SURVIVED
            # a traceback its program logged at WARNING or INFO level (torch._dynamo's '[WARNING] WON'T CONVERT ... due to:'
            # with the compile error under it) was caught and reported: the run went on from it, it did not end there
            logged = _logged_below_error(log, tb, line_hits)
            if logged:
                w *= WARNING_DAMP
            text = f"{tb.exc_type}: {tb.message}" if tb.message else tb.exc_type
            signals.append(Signal(cls, w, "traceback", f"traceback:{rule}", tb.source, tb.line_no, text, role, survived, logged))
        for h in log.hits:
            same = hits_by_line[(h.source, h.line_no)]
            # one line, several signatures: a cause on the line silences symptoms of other classes
            if h.role is not Role.CAUSE and any(o.role is Role.CAUSE and o.failure_class != h.failure_class for o in same):
                continue
            if (h.source, h.line_no) in superseded and h.severity is not Severity.CRITICAL:
                continue
            w = ROLE_W[h.role] * SEV_W[h.severity] * (1 + 0.12 * math.log(max(1, h.count)))
            warning = (bool(_WARNING.search(h.text)) and h.role is not Role.HINT and "Error" not in h.text.split(":")[0]
                       and h.signature_id not in _logged_as_warning())
            if warning:
                w *= WARNING_DAMP
            elif h.role is not Role.HINT and informational(h.text):
                w *= WARNING_DAMP * ROLE_W[Role.HINT] / ROLE_W[h.role]  # below any failure, and never named alone
                warning = True
            survived = _survived(log, h.line_no, last_prog)
            if survived:
                w *= SURVIVED
            signals.append(Signal(h.failure_class, w, "signature", h.signature_id, h.source, h.line_no, _around_match(h.text, h.signature_id),
                                  h.role, survived, warning))
        for a in log.trajectory.anomalies:
            signals.append(_anomaly_signal(a))
        if not live:  # a process or tracker run still running says more than where its log stops
            signals += stop_signals(log)
    for src in sources or []:
        for a in src.signals:
            signals.append(_anomaly_signal(a, kind="source"))
    return signals


def _raw_line(log: LogEvidence, line_no: int, line_hits: list[SignatureHit]) -> str | None:
    tail = log.tail
    if tail is not None and tail.start_line <= line_no < tail.start_line + len(tail.lines):
        return tail.lines[line_no - tail.start_line]
    return line_hits[0].text if line_hits else None


def _logged_below_error(log: LogEvidence, tb, line_hits: list[SignatureHit]) -> bool:
    """The exception line carries a WARNING/INFO level in its prefix: a logger reported a caught exception."""
    raw = _raw_line(log, tb.line_no, line_hits)
    if not raw:
        return False
    at = raw.find(tb.exc_type)
    prefix = raw[:at] if at > 0 else ""
    return bool(prefix) and (bool(re.search(r"\[?(WARNING|WARN|INFO|DEBUG)\]?[\s:]", prefix)) or bool(re.match(r"^\s*[WI]\d{4} ", prefix)))


UNCLASSIFIED = "unclassified-exception"


def _unclassified_ending(log: LogEvidence, tb, last: bool, hits_by_line: dict[tuple[str, int], list[SignatureHit]],
                         last_prog: int | None) -> Signal | None:
    """The log's last exception, of a type no rule classes and its frames place nowhere: the run's code raised it.

    What ended a run is never dropped because its type is unknown (a NameError in the model code): it is named
    as an error in the user's code or its setup, config-error in this taxonomy (as KeyError, TypeError and
    ValueError are), but with a symptom's strength and confidence: it says where the run ended, not why, so
    any cause the log names outranks it. Only the last exception counts, and only if the run did not go on.
    """
    if not last or hits_by_line.get((tb.source, tb.line_no)) or _survived(log, tb.line_no, last_prog):
        return None
    if tb.exc_type.rsplit(".", 1)[-1] in ("KeyboardInterrupt", "SystemExit", "StopIteration", "GeneratorExit"):
        return None
    text = f"{tb.exc_type}: {tb.message}" if tb.message else tb.exc_type
    return Signal(FailureClass.CONFIG_ERROR, ROLE_W[Role.SYMPTOM], "traceback", f"traceback:{UNCLASSIFIED}",
                  tb.source, tb.line_no, text, Role.SYMPTOM)


def _anomaly_signal(a: Anomaly, kind: str = "anomaly") -> Signal:
    return Signal(a.failure_class, ANOMALY_W[a.severity], kind, a.kind.value, a.source, a.line_no, a.detail,
                  Role.CAUSE if a.severity is Severity.CRITICAL else Role.SYMPTOM)


def _memory_flat(logs: list[LogEvidence]) -> tuple[bool, str]:
    for log in logs:
        for s in log.trajectory.series:
            if s.name == "mem" and s.count >= 4 and s.min and s.max is not None and s.min > 0 and s.max / s.min < 1.3:
                return True, f"logged memory stayed flat ({s.min:.4g}-{s.max:.4g}) up to the kill"
    return False, ""


def _lead_the_ending(signals: list[Signal], logs: list[LogEvidence]) -> None:
    """Give the signal that most likely ended the run a lead of 1.3x.

    The first cause after the last progress is the likely root of a cascade. A cause with progress lines after it
    (fewer than make it 'survived') did not end the run when one comes after the progress. With no cause anywhere,
    the strongest symptom is what ended the run (a bare 'Killed' or exit status 137 from the OOM killer, a
    launcher's exit code)."""
    terminal = [s for s in signals if s.role is Role.CAUSE and not s.survived and not s.warning and s.line_no is not None]
    progress_at = {log.source: lp for log in logs if (lp := _last_progress_line(log)) is not None}
    after = [s for s in terminal if s.kind == "anomaly" or (s.line_no or 0) >= progress_at.get(s.source, 0)]
    terminal = after or terminal
    if terminal:
        # every cause on the first cause line gets the lead (one line can name two classes, e.g. TF's
        # 'Model diverged with loss = NaN.'): which one the matcher listed first must not decide
        first_line: dict[str, int] = {}
        for s in terminal:
            first_line[s.source] = min(first_line.get(s.source, s.line_no or 0), s.line_no or 0)
        for s in terminal:
            if s.line_no == first_line[s.source]:
                s.weight *= 1.3
    else:
        ends = [s for s in signals if s.role is Role.SYMPTOM and s.kind == "signature" and not s.survived and not s.warning]
        if ends:
            max(ends, key=lambda s: (s.weight, -(s.line_no or 0))).weight *= 1.3


def _damp_warnings(signals: list[Signal]) -> None:
    """Warnings yield to an ending: when a line that is no warning and was not survived (a scheduler's kill, an
    exception, a signal) is there, lines logged as warnings (however many: a compiler warning repeated per graph
    break) cannot outrank it."""
    if any(s.kind in ("signature", "traceback") and s.role is not Role.HINT and not s.warning and not s.survived for s in signals):
        for s in signals:
            if s.warning:
                s.weight *= WARNING_DAMP


def _external_kill(signals: list[Signal], logs: list[LogEvidence]) -> list[str]:
    """Exit 137 with flat memory is an external SIGKILL, not an OOM: the kill itself is then the failure (a
    scheduler, a preemption, a watchdog or a person), so it becomes a process-crash cause. Returns the notes."""
    notes: list[str] = []
    if any(s.failure_class is FailureClass.OOM and s.role is Role.CAUSE for s in signals):
        return notes
    flat, why = _memory_flat(logs)
    if not flat:
        return notes
    for s in signals:
        if s.failure_class is FailureClass.OOM and s.label == "sigkill-exit-137":
            s.failure_class = FailureClass.PROCESS_CRASH
            s.label = EXTERNAL_KILL
            s.role = Role.CAUSE
            s.weight = max(s.weight, ROLE_W[Role.CAUSE] * SEV_W[Severity.SIGNIFICANT] * (SURVIVED if s.survived else 1.0))
            s.text += f" ({why})"
            notes.append(f"SIGKILL without memory pressure: {why}")
    return notes


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
                  logs: list[LogEvidence]) -> bool:
    """The leading class's every signal came before a later attempt that ran clean: it did not end the run."""
    return bool(ranked) and all(s.survived for s in by_class[ranked[0][0]]) and any(
        clean_retry_start(log) is not None for log in logs)


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
    confidence = verdict_confidence(kind)
    if all(s.kind == "stop" for s in primary_signals):
        confidence = min(confidence, CONFIDENCE_CAP)
    return kind, confidence


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
            went_on = next((_progress_after(log, best.line_no) for log in logs if log.source == best.source and best.line_no), None)
            ruled.append(RuledOut(failure_class=cls, reason=losing.survived(best, went_on, retry.get(best.source))))
        elif all(s.warning for s in sig):
            ruled.append(RuledOut(failure_class=cls, reason=losing.warned(best, decisive)))
        elif all(s.source == decisive.source and (s.line_no or 0) > decisive_line for s in sig) and all(s.role is not Role.CAUSE or s.kind == "traceback" for s in sig):
            ruled.append(RuledOut(failure_class=cls, reason=losing.follows(best, decisive)))
        elif decisive.role is Role.CAUSE and all(s.role is Role.SYMPTOM for s in sig):
            ruled.append(RuledOut(failure_class=cls, reason=losing.symptom(best, decisive)))
        elif score >= 0.35 * top and any(s.role is Role.HINT or s.kind == "anomaly" for s in sig):
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
    _lead_the_ending(signals, logs)
    _damp_warnings(signals)
    numeric_before_crash(signals)
    anomalies_below_the_ending(signals)
    peers_follow_a_death(signals)
    notes = _external_kill(signals, logs)

    scores, by_class = _class_scores(signals)
    ranked = sorted(scores.items(), key=lambda t: -t[1])
    past = _went_on_past(ranked, by_class, logs)
    if past:
        notes.append(f"{ranked[0][0].value} came before a later attempt that ran without error: the run went on past it")
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
