"""Every piece of evidence as a weighted signal: signature hits, the final exceptions of tracebacks, trajectory
anomalies, where the log stops, a collector's findings; each weighed by its role, its severity and where it sits.
"""

from __future__ import annotations

import math
import re
from functools import cache

from ml_skills.catalog.loader import compiled_exception_rules, signatures
from ml_skills.engine.analyse.stops import stop_signals
from ml_skills.engine.classify.exceptions import callers_of_chained, traceback_class
from ml_skills.engine.classify.signals import ANOMALY_W, ROLE_W, SEV_W, SURVIVED, TRACEBACK_W, WARNING_DAMP, Signal
from ml_skills.engine.classify.terminal import last_finite_loss_line, last_progress_line, survived_line
from ml_skills.engine.read.levels import informational
from ml_skills.engine.read.metrics import parse_timestamp
from ml_skills.engine.read.tracebacks import interrupted
from ml_skills.lazyre import lazy
from ml_skills.models import Anomaly, FailureClass, LogEvidence, Role, Severity, SignatureHit, SourceEvidence, TracebackEvent

LIVE_STATES = ("running", "sleeping", "pipeline_state_running")
QUOTE_WIDTH = 400  # a longer line is quoted around its match, so the cited text holds the decisive words
_WARNING = lazy(r"(Warning:|WARNING|\bwarn(ing)?s?\.|\[W \w|^W\d{4} |\bW\d{4} \d\d:|UserWarning|FutureWarning|DeprecationWarning|\bwarnings\.warn)")
_WRAPPERS = lazy(r"(RayTaskError|ChildFailedError|CalledProcessError|ProcessRaisedException|HydraException|SystemExit|TrainingFailedError|TuneError)")
# torch.multiprocessing.spawn's join re-raising a child's failure ('-- Process 3 terminated with the following error:');
# before ProcessRaisedException existed it raised a plain Exception: a launcher's report, the child's error follows it
_SPAWN_JOIN = lazy(r"multiprocessing/spawn\.py:join$")


@cache
def _channel_rules() -> frozenset[str]:
    """The exception rules whose frames name the channel a peer's death came through (a multiprocessing pipe)."""
    return frozenset(r.id for r, *_ in compiled_exception_rules() if r.names_the_channel)


def _wrapper(tb: TracebackEvent) -> bool:
    """A launcher's exception that reports another process's failure: it carries no class of its own."""
    innermost = next((f for f in reversed(tb.frames) if not f.startswith("  ")), "")  # frames, then code lines
    return bool(_WRAPPERS.search(tb.exc_type)) or bool(_SPAWN_JOIN.search(innermost))


@cache
def _logged_as_warning() -> frozenset[str]:
    """Signatures of failures that their framework reports at WARNING level (not damped)."""
    return frozenset(s.id for s in signatures() if s.logged_as_warning)


@cache
def _before_progress() -> dict[str, FailureClass]:
    """The class of each signature that reads differently in a log with no training progress (its `before_progress`)."""
    return {s.id: s.before_progress for s in signatures() if s.before_progress is not None}


@cache
def _narrowed() -> dict[str, frozenset[str]]:
    """Each signature's broader readings of the same text (its `narrows`), by id."""
    return {s.id: frozenset(s.narrows) for s in signatures() if s.narrows}


@cache
def _goes_on() -> frozenset[str]:
    """Signatures whose line says the run skipped a bad step and went on."""
    return frozenset(s.id for s in signatures() if s.goes_on)


@cache
def _signature_regexes() -> dict[str, re.Pattern[str]]:
    return {s.id: lazy(s.pattern) for s in signatures()}


def around_match(text: str, signature_id: str, width: int = QUOTE_WIDTH) -> str:
    """A long line quoted around what matched: a launcher's 900-character command line ends in its exit code."""
    if len(text) <= width:
        return text
    rx = _signature_regexes().get(signature_id)
    m = rx.search(text) if rx else None
    if m is None or m.end() <= width - 20:
        return text
    start = max(0, m.start() - (width - (m.end() - m.start())) // 2)
    return "..." + text[start : start + width]


def collect_signals(logs: list[LogEvidence], sources: list[SourceEvidence] | None = None) -> list[Signal]:
    signals: list[Signal] = []
    live = any((s.state or "").lower() in LIVE_STATES for s in sources or [])
    for log in logs:
        last_prog = last_progress_line(log)
        hits_by_line: dict[tuple[str, int], list[SignatureHit]] = {}
        for h in log.hits:
            hits_by_line.setdefault((h.source, h.line_no), []).append(h)
        # Tracebacks first: where an exception was raised (its frames) outranks a generic
        # signature on its last line, e.g. a TypeError inside save_model is a checkpoint failure.
        superseded: set[tuple[str, int]] = set()
        callers = callers_of_chained(log.tracebacks)
        last_tb = _last_own_exception(log.tracebacks, hits_by_line)
        last_any = max((i for i, tb in enumerate(log.tracebacks) if not _wrapper(tb)), default=-1)
        for i, tb in enumerate(log.tracebacks):
            if _wrapper(tb) or tb.message.startswith("Traceback (most recent call last)"):
                continue
            cls, rw, rule = traceback_class(callers.get(i, tb), hits_by_line)
            if cls is None:
                ending = _unclassified_ending(log, tb, i == last_tb, hits_by_line, last_prog, echoed=i < last_any)
                if ending is not None:
                    signals.append(ending)
                continue
            w = TRACEBACK_W * rw * (0.6 if tb.chained and not tb.exc_type.endswith(")") else 1.0)
            role = Role.CAUSE
            # an exception whose message is itself a symptom ("Connection closed by peer", a collective
            # timeout) reports another process's failure: it is a symptom, whatever raised it
            line_hits = hits_by_line.get((tb.source, tb.line_no), [])
            symptom = next((h for h in line_hits if h.role is Role.SYMPTOM), None)
            # (but a rule whose frames name the channel, a multiprocessing pipe, already says whose death it reports: this
            # process's peer died, and no rank of a collective is waiting for the first error)
            if symptom is not None and not any(h.role is Role.CAUSE for h in line_hits) and rule not in _channel_rules():
                cls, role, rule = symptom.failure_class, Role.SYMPTOM, symptom.signature_id
                w *= ROLE_W[Role.SYMPTOM] / ROLE_W[Role.CAUSE]
            # the traceback's class (decided above, after any symptom override) replaces weaker
            # signatures of other classes on its line; a signature of the same class stays
            if any(h.failure_class != cls and h.severity is not Severity.CRITICAL for h in line_hits):
                superseded.add((tb.source, tb.line_no))
            survived = survived_line(log, tb.line_no, last_prog)
            if survived:
                w *= SURVIVED
            # a traceback its program logged at WARNING or INFO level (torch._dynamo's '[WARNING] WON'T CONVERT ... due to:'
            # with the compile error under it) was caught and reported: the run went on from it, it did not end there
            logged = _logged_below_error(log, tb, line_hits)
            if logged:
                w *= WARNING_DAMP
            text = f"{tb.exc_type}: {tb.message}" if tb.message else tb.exc_type
            signals.append(Signal(cls, w, "traceback", f"traceback:{rule}", tb.source, tb.line_no, text, role, survived, logged))
        signals += _hit_signals(log, hits_by_line, superseded, last_prog)
        for a in log.trajectory.anomalies:
            signals.append(_anomaly_signal(a))
        if not live:  # a process or tracker run still running says more than where its log stops
            signals += stop_signals(log)
    for src in sources or []:
        for a in src.signals:
            signals.append(_anomaly_signal(a, kind="source"))
    _echoes_survived(signals, logs)
    return signals


def _timed(log: LogEvidence) -> bool:
    lines = [*(log.head.lines if log.head else []), *(log.tail.lines if log.tail else [])]
    return any(parse_timestamp(x) is not None for x in lines)


def _echoes_survived(signals: list[Signal], logs: list[LogEvidence]) -> None:
    """A launcher's untimed file (nohup.out, a job's stderr) printing a kill that the run's own timed log records and went
    on past is that same kill, survived there too: bash's 'Killed' job line in nohup.out for the attempt train.log shows
    restarted and completed (the thirteenth trial's case07 read as oom, crashed). As many echoes of a signature as the
    timed logs went on past, the first ones."""
    if len(logs) < 2:
        return
    untimed = {log.source for log in logs if not _timed(log)}
    went_on: dict[str, int] = {}
    for s in signals:
        if s.survived and s.kind == "signature" and s.source not in untimed:
            went_on[s.label] = went_on.get(s.label, 0) + 1
    for s in signals:
        if not s.survived and s.kind == "signature" and s.source in untimed and went_on.get(s.label, 0) > 0:
            went_on[s.label] -= 1
            s.survived = True
            s.weight *= SURVIVED



def _hit_signals(log: LogEvidence, hits_by_line: dict[tuple[str, int], list[SignatureHit]], superseded: set[tuple[str, int]],
                 last_prog: int | None) -> list[Signal]:
    """The signals of the log's signature hits, weighed by role, severity, level and whether the run went on past them."""
    signals: list[Signal] = []
    went_on, first_gone_past = _gone_past(log, last_prog)
    skips = [h for h in log.hits if h.signature_id in _goes_on()]
    finite_at = last_finite_loss_line(log) if skips else None
    in_worker = _loading_a_sample(log.hits)
    for h in log.hits:
        if h.failure_class is FailureClass.IO_CHECKPOINT and (h.source, h.line_no) in in_worker:
            continue  # the worker's failure is read by its own line: what it loaded is a sample, not a checkpoint
        same = hits_by_line[(h.source, h.line_no)]
        if any(h.signature_id in _narrowed().get(o.signature_id, ()) for o in same):
            continue  # a more exact reading of this text is on the line
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
        # a warning the run already went on past earlier in the log, repeated: the same routine event again (fairseq's
        # fp16 scaler backing off every epoch while the loss falls), not a new failure because the log stops after it
        survived = went_on[id(h)] or (warning and first_gone_past.get((h.source, h.signature_id), h.line_no) < h.line_no) \
            or (h.signature_id in _goes_on() and finite_at is not None and finite_at > h.line_no)
        if survived:
            w *= SURVIVED
        info = warning and h.role is not Role.HINT and not _WARNING.search(h.text) and informational(h.text)
        cls = _before_progress()[h.signature_id] if h.signature_id in _before_progress() and _started_without_progress(log) \
            else h.failure_class  # the log's shape is read only for the few signatures it changes
        signals.append(Signal(cls, w, "signature", h.signature_id, h.source, h.line_no, around_match(h.text, h.signature_id),
                              h.role, survived, warning, info=info))
    return signals


def _started_without_progress(log: LogEvidence) -> bool:
    """The log shows the run up to its failure and no training progress: it printed something before its first error
    (its start-up) and no metric line. A paste that starts at the error says nothing of the steps before it."""
    if log.trajectory.metric_lines:
        return False
    first = min([h.line_no for h in log.hits] + [t.start_line for t in log.tracebacks], default=None)
    return first is not None and first > 1


def _gone_past(log: LogEvidence, last_prog: int | None) -> tuple[dict[int, bool], dict[tuple[str, str], int]]:
    """Whether the run went on past each hit (by the hit's id), and the first line of each signature it went on past."""
    went_on = {id(h): survived_line(log, h.line_no, last_prog) for h in log.hits}
    first: dict[tuple[str, str], int] = {}
    for h in log.hits:
        if went_on[id(h)]:
            key = (h.source, h.signature_id)
            first[key] = min(first.get(key, h.line_no), h.line_no)
    return went_on, first

def _raw_line(log: LogEvidence, line_no: int, line_hits: list[SignatureHit]) -> str | None:
    tail = log.tail
    if tail is not None and tail.start_line <= line_no < tail.start_line + len(tail.lines):
        return tail.lines[line_no - tail.start_line]
    return line_hits[0].text if line_hits else None


def _logged_below_error(log: LogEvidence, tb, line_hits: list[SignatureHit]) -> bool:
    """The exception line carries a WARNING/INFO level in its prefix: a logger reported a caught exception. Or it is
    NumPy 2's warning that a module built for NumPy 1.x 'may crash' ('AttributeError: _ARRAY_API not found' under
    the banner): printed, not raised; a real failure of that import raises again below it."""
    if tb.exc_type == "AttributeError" and tb.message.startswith("_ARRAY_API not found"):
        return True
    raw = _raw_line(log, tb.line_no, line_hits)
    if not raw:
        return False
    at = raw.find(tb.exc_type)
    prefix = raw[:at] if at > 0 else ""
    return bool(prefix) and (bool(re.search(r"\[?(WARNING|WARN|INFO|DEBUG)\]?[\s:]", prefix)) or bool(re.match(r"^\s*[WI]\d{4} ", prefix)))


UNCLASSIFIED = "unclassified-exception"
WORKER_BLOCK = 80  # lines from 'Caught X in DataLoader worker process N' through the worker's 'Original Traceback'


def _loading_a_sample(hits: list[SignatureHit]) -> set[tuple[str, int]]:
    """The lines of a DataLoader worker's failure: from PyTorch's 'Caught X in DataLoader worker process N' through the
    worker's own traceback below it. A corrupt or truncated file read there is a sample the dataset loads (a cut .npz
    among thousands: 'zipfile.BadZipFile: File is not a zip file'), not a checkpoint (trial 8's case03)."""
    starts = [(h.source, h.line_no) for h in hits if h.signature_id == "dataloader-worker-exception" and "DataLoader worker" in h.text]
    return {(h.source, h.line_no) for h in hits for src, at in starts if h.source == src and at <= h.line_no <= at + WORKER_BLOCK}


def _last_own_exception(tracebacks: list[TracebackEvent], hits_by_line: dict[tuple[str, int], list[SignatureHit]]) -> int:
    """The index of the log's last exception that is not a launcher's wrapper nor a peer's echo: after a rank's own
    error, its peers' 'Connection closed by peer ... a remote worker crashing' and collective timeouts report that
    failure, they do not replace it (trial 8's case01: a shape error on rank 3, then three ranks' gloo errors)."""
    own = [i for i, tb in enumerate(tracebacks) if not _wrapper(tb)]
    while len(own) > 1 and _echo(tracebacks[own[-1]], hits_by_line):
        own.pop()
    return own[-1] if own else -1


def _echo(tb: TracebackEvent, hits_by_line: dict[tuple[str, int], list[SignatureHit]]) -> bool:
    line_hits = hits_by_line.get((tb.source, tb.line_no), [])
    return any(h.role is Role.SYMPTOM for h in line_hits) and not any(h.role is Role.CAUSE for h in line_hits)


FRAMELESS_END = 10  # lines after an exception line with no frames (a paste that starts with the error) for it to end the log


def _unclassified_ending(log: LogEvidence, tb, last: bool, hits_by_line: dict[tuple[str, int], list[SignatureHit]],
                         last_prog: int | None, echoed: bool = False) -> Signal | None:
    """The log's last exception, of a type no rule classes and its frames place nowhere: the run's code raised it.

    What ended a run is never dropped because its type is unknown (a NameError in the model code): it is named
    as an error in the user's code or its setup, config-error in this taxonomy (as KeyError, TypeError and
    ValueError are), but with a symptom's strength and confidence: it says where the run ended, not why, so
    any cause the log names outranks it. Only the last exception counts, and only if the run did not go on.
    One that its peers' errors echo after it (`echoed`: 'Connection closed by peer ... a remote worker crashing') is
    the cause those symptoms report, and is read as one.
    """
    if not last or hits_by_line.get((tb.source, tb.line_no)) or survived_line(log, tb.line_no, last_prog):
        return None
    if not tb.frames and (log.total_lines or 0) - tb.line_no > FRAMELESS_END:
        return None  # an exception line alone, of no known class, with the log going on after it: nothing says it ended the run
    # a cancellation (asyncio's, concurrent.futures', TensorFlow's 'Enqueue operation was cancelled' in a feeder thread)
    # is requested by whoever stopped the work, the program closing its queues at its end or after another failure
    if tb.exc_type.rsplit(".", 1)[-1] in ("SystemExit", "StopIteration", "GeneratorExit", "CancelledError") \
            or interrupted(tb.exc_type, tb.message):
        return None
    text = f"{tb.exc_type}: {tb.message}" if tb.message else tb.exc_type
    return Signal(FailureClass.CONFIG_ERROR, ROLE_W[Role.SYMPTOM], "traceback", f"traceback:{UNCLASSIFIED}",
                  tb.source, tb.line_no, text, Role.CAUSE if echoed else Role.SYMPTOM)


def _anomaly_signal(a: Anomaly, kind: str = "anomaly") -> Signal:
    return Signal(a.failure_class, ANOMALY_W[a.severity], kind, a.kind.value, a.source, a.line_no, a.detail,
                  Role.CAUSE if a.severity is Severity.CRITICAL else Role.SYMPTOM)
