"""How the run ended (run status), judged from all evidence after classification; when the evidence cannot name a
cause, insufficient.py says the smallest artifact that would."""

from __future__ import annotations

import math

from ml_skills.engine.analyse.cuttraceback import ends_in_traceback
from ml_skills.engine.analyse.routine import closed_after_routine, ends_in_routine
from ml_skills.engine.analyse.scalerskips import scaler_went_on
from ml_skills.engine.analyse.shellprompt import back_at_prompt
from ml_skills.engine.analyse.stops import DIST_INIT
from ml_skills.engine.classify.signals import Signal
from ml_skills.engine.classify.terminal import clean_retry_start, last_attempt_start, progress_after
from ml_skills.engine.read.tracebacks import interrupted
from ml_skills.lazyre import lazy
from ml_skills.models import (
    AnomalyKind,
    Classification,
    EvidenceStatus,
    FailureClass,
    LogEvidence,
    Role,
    RunStatus,
    Severity,
    SourceEvidence,
)


def fmt_number(x: float | None) -> str:
    if x is None:
        return "?"
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


SCHEDULER_ENDS = frozenset({"job-time-limit", "launch-time-limit"})
LIVE_STATES = frozenset({"running", "pipeline_state_running", "sleeping"})


def alive(sources: list[SourceEvidence]) -> bool:
    """A source (a process, a pipeline) says the run is alive now, which a log alone never can."""
    return any((s.state or "").lower() in LIVE_STATES for s in sources)


def run_status(cls: Classification, signals: list[Signal], logs: list[LogEvidence], sources: list[SourceEvidence]) -> RunStatus:
    for src in sources:
        state = (src.state or "").lower()
        if state in LIVE_STATES and cls.primary is None:
            return RunStatus.RUNNING
        if state in ("stalled", "hung"):
            return RunStatus.HUNG
        if state in ("zombie", "gone") and (src.details.get("exit_code") or src.details.get("exit_signal")):
            return RunStatus.CRASHED
        if state in ("succeeded", "finished", "completed") and cls.primary is None:
            return RunStatus.COMPLETED
    terminal = _terminal(signals)
    # a WARNING or INFO line the run went on past (tensorboardX's 'NaN or Inf found in input tensor') is not a failure
    # it recovered from: the program itself judged it not fatal
    survived = [s for s in signals if s.survived and not s.warning and s.role.value == "cause"]
    completed = any("completed-marker" in log.frameworks for log in logs)
    kinds = {a.kind for log in logs for a in log.trajectory.anomalies} | {a.kind for s in sources for a in s.signals}
    if cls.primary in (FailureClass.NAN_INF, FailureClass.OPTIMIZATION_DIVERGENCE) and (
        kinds & {AnomalyKind.NAN_ONSET, AnomalyKind.LOSS_BLOWUP, AnomalyKind.ACCURACY_COLLAPSE} or cls.primary is FailureClass.NAN_INF
    ):
        # a NaN guard or a framework check that raised ended the process; a loss that went NaN and ran on did not
        return RunStatus.CRASHED if _raised(logs) else _after_nan(logs)
    # a scheduler's verdict (a time or run limit reached) is the terminal event: whether or not the run had stalled
    # before it, the process was ended, so the run is over, not hanging
    if any(s.label in SCHEDULER_ENDS and not s.survived for s in signals):
        return RunStatus.CRASHED
    if cls.primary is None and _stopped_by_a_person(logs):
        return RunStatus.UNKNOWN  # a Ctrl-C ended it (the launcher's teardown after it is no crash): nothing failed
    if cls.primary is FailureClass.STALLED and not terminal:
        # a run that slowed down and is still stepping at its last line is slow, not hung
        slowed = AnomalyKind.THROUGHPUT_COLLAPSE in kinds and AnomalyKind.NO_PROGRESS not in kinds and _ends_in_progress(logs)
        return RunStatus.DEGRADED if slowed else RunStatus.HUNG
    if AnomalyKind.NO_PROGRESS in kinds:
        return RunStatus.HUNG
    if terminal and _completed_after(terminal, logs):
        return RunStatus.COMPLETED  # a later attempt (a resubmission, a retry) ran to its end: the status is the last one's
    if terminal:
        return RunStatus.CRASHED
    if any(ends_in_traceback(l) for l in logs):  # the log ends in a traceback's frames: an exception ended the run, the paste lost its last line
        return RunStatus.CRASHED
    degraded = {AnomalyKind.TRAIN_VAL_DIVERGENCE, AnomalyKind.THROUGHPUT_COLLAPSE, AnomalyKind.EARLY_PERFECT_VALIDATION,
                AnomalyKind.EVAL_ON_TRAIN_DATA, AnomalyKind.VALIDATION_METRIC_NEAR_ZERO, AnomalyKind.VALIDATION_METRIC_FROZEN, AnomalyKind.LOSS_FROZEN,
                AnomalyKind.LR_ZERO}
    # a run that finished with a useless result (every AP zero, a frozen loss) finished degraded, not well
    if kinds & degraded or cls.primary is FailureClass.EVALUATION_MISMATCH:
        return RunStatus.DEGRADED
    if completed or (cls.primary is None and any(closed_after_routine(log) for log in logs)):
        return RunStatus.COMPLETED
    if survived:
        return RunStatus.RECOVERED
    if cls.primary is None and not terminal and any(back_at_prompt(log) is not None for log in logs):
        return RunStatus.COMPLETED  # the script returned to the shell with no failure printed: it ended on its own
    if cls.primary is None and (_ends_in_progress(logs) or any(ends_in_routine(log) for log in logs)):
        return RunStatus.RUNNING
    if cls.primary is None and any(scaler_went_on(log) for log in logs):
        # the log stops on the scaler's own lines, training having gone on between them: recovered as far as it goes
        return RunStatus.RECOVERED
    return RunStatus.UNKNOWN


def _stopped_by_a_person(logs: list[LogEvidence]) -> bool:
    """The log's last exception is a Ctrl-C (KeyboardInterrupt, or torchrun's SignalException for SIGINT)."""
    for log in logs:
        last = max(log.tracebacks, key=lambda t: t.line_no, default=None)
        if last is not None and interrupted(last.exc_type, last.message) and last.line_no >= (log.total_lines or 0) - 400:
            return True
    return False


def _terminal(signals: list[Signal]) -> list[Signal]:
    """The fatal lines: a failure's own line the run did not go on past."""
    # a hang or a bad evaluation is a live or finished run, not a dead one: their own lines are not a crash
    live = (FailureClass.STALLED, FailureClass.EVALUATION_MISMATCH)
    # (a traceback its program logged at WARNING and went on from, or NumPy 2's printed 'may crash' warning, is neither)
    return [s for s in signals if not s.survived and not (s.warning and s.kind == "traceback") and s.role.value in ("cause", "symptom")
            and s.kind in ("signature", "traceback") and not (s.kind == "signature" and s.failure_class in live)
            # a Ctrl-C (KeyboardInterrupt, read as stalled) ended a process that had stopped progressing
            and not (s.kind == "traceback" and s.failure_class is FailureClass.STALLED)
            # a symptom its program logged as information (NCCL's 'NCCL INFO [Service thread] Connection closed by
            # localRank 1' as every rank tears its communicator down after 'Training done') ended nothing
            and not (s.info and s.role is Role.SYMPTOM)]


_QUIET_AFTER = 5
"""Lines a log may print after its last progress line (a warning, a checkpoint save) and still end in training."""


def _ends_in_progress(logs: list[LogEvidence]) -> bool:
    """The log ends while training was making progress: its last progress line is among its last few lines, none
    after it an error or a wait for other ranks, and no end was printed. That is a run in progress as far as the log
    goes (the log alone cannot say whether its process is still alive: the report asks for the process state).
    """
    for log in logs:
        lp = log.trajectory.last_progress
        if lp is None or log.tail is None or not log.tail.lines or lp.source != log.source:
            continue
        after = [x for i, x in enumerate(log.tail.lines, log.tail.start_line) if i > lp.line_no and x.strip()]
        # a line the catalog reads as a failure (a launcher passing on a signal, a stall report) glued to or after the
        # last progress line ended the run, whatever words it uses
        named = any(h.line_no >= lp.line_no and h.role is not Role.HINT for h in log.hits)
        if lp.line_no >= log.tail.start_line and len(after) <= _QUIET_AFTER and not named and \
                not any(_ERROR_WORD.search(x) or DIST_INIT.search(x) for x in after):
            return True
    return False


_ERROR_WORD = lazy(r"(?i)(error|exception|traceback|killed|fatal|abort|fail|timed? ?out|nan\b)")


def outlived(cls: Classification, status: RunStatus, signals: list[Signal],
             logs: list[LogEvidence]) -> tuple[Classification, FailureClass | None]:
    """A failure the run outlived is not its failure: when the log's last attempt ran to its end after every fatal line
    (a resubmission that 'Successfully completed', a restart that printed 'Finished training!'), the earlier attempt's
    class is kept as contributing, and the run has no primary cause. Returns the classification and the outlived class."""
    # the class's own lines, those the run went on past included (a launch that died at import, then one that trained)
    own = [s for s in signals if s.failure_class is cls.primary and s.role.value in ("cause", "symptom")
           and s.kind in ("signature", "traceback")]
    fatal = _terminal(signals) + own
    if status is not RunStatus.COMPLETED or cls.primary is None or not own or not _completed_after(fatal, logs):
        return cls, None
    why = (f"an earlier attempt failed ({cls.primary.value}) and a later one ran to its end: the run outlived it, so it "
           "is contributing, not the cause")
    rest = [c for c in cls.contributing if c is not cls.primary]
    return cls.model_copy(update={"primary": None, "confidence": 0.0, "contributing": [cls.primary, *rest],
                                  "reasons": [*cls.reasons, why]}), cls.primary


def _after_nan(logs: list[LogEvidence]) -> RunStatus:
    """A run that went non-finite and was not stopped: recovered if every series that went non-finite is finite
    again at its last value (a loss scaler skipped the overflowing steps, one bad interval passed), else diverged.
    """
    series = [x for log in logs for x in log.trajectory.series if x.count]
    went_bad = [x for x in series if any(v is None for _, v in x.points) or _bad(x.last)]
    if not went_bad:
        return RunStatus.DIVERGED  # the NaN is only in a line the series did not keep: say what the onset says
    if all(not _bad(x.last) for x in went_bad):
        return RunStatus.RECOVERED
    return RunStatus.DIVERGED


def _bad(v: float | None) -> bool:
    return v is None or not math.isfinite(v)


def _completed_after(terminal: list[Signal], logs: list[LogEvidence]) -> bool:
    """Every fatal line comes before its log's last sign of completion: an earlier attempt failed, the last finished.

    A job report that holds a first attempt killed at its memory limit and a resubmission that 'Successfully
    completed', or a retry loop whose second run printed its last epoch, describes a run that completed.
    """
    done = {log.source: log.frameworks["completed-marker"] for log in logs if "completed-marker" in log.frameworks}
    if not done or not all(s.source in done and (s.line_no or 0) < done[s.source] for s in terminal):
        return False
    return all(_ran_again(log, max(s.line_no or 0 for s in terminal if s.source == log.source), done[log.source])
               for log in logs if any(s.source == log.source for s in terminal))


# a batch script's own closing echo: the job or script named, not training, and no claim that anything succeeded
_SCRIPT_END = lazy(r"(?i)^\W*+(?:\w++\W*+){0,3}?\b(?:job|script)\s++(?:completed|finished|ended|done)\s*+[.!]*+\s*+$")


def _ran_again(log: LogEvidence, failed_at: int, end: int) -> bool:
    """The completion after a failure belongs to something that ran after it. Training named as finished by the
    program (a retry loop's 'Finished training!') is the program's own word; a batch script's 'Job finished' echoed
    right after its program's traceback (1350: a bare TypeError, 'Test job', 'Job finished') ends the script whatever
    its program did, so it counts only after training progress, a retry's start-up or a later job's output."""
    tail = log.tail
    if tail is None or not 0 <= end - tail.start_line < len(tail.lines) or not _SCRIPT_END.match(tail.lines[end - tail.start_line]):
        return True
    first = progress_after(log, failed_at)
    if first is not None and first[0] < end:
        return True
    return any(x is not None and failed_at < x <= end for x in (clean_retry_start(log), last_attempt_start(log)))


def completed_clean(cls: Classification, status: RunStatus, logs: list[LogEvidence], sources: list[SourceEvidence]) -> bool:
    """A run that says it completed, with no failure, no anomaly and no unread source: nothing to recover."""
    if status is not RunStatus.COMPLETED or cls.primary is not None or cls.contributing:
        return False
    # a minor anomaly (a clipped spike the run trained past) is an observation, not something to recover from
    if any(any(a.severity is not Severity.MINOR for a in l.trajectory.anomalies) or l.status is not EvidenceStatus.OK for l in logs):
        return False
    return not any(s.missing or s.signals or s.status is not EvidenceStatus.OK for s in sources)


_SIGINT_RAISED = lazy(r"SignalException: Process \d+ got signal: 2\b")
_FRAME = lazy(r'^\s*(File "[^"]+", line \d+|-+> ?\[?\d+|Traceback \(most recent call last\))')
_EXCEPTION = lazy(r"^\s*(E\s+)?([A-Za-z_][\w.]*\.)?[A-Z]\w*(Error|Exception)(:|\s*$)")
# a native fatal line: a kernel's or the C library's assertion, a fatal signal the shell or faulthandler reports (the
# process died there, whatever the paste kept after it)
_NATIVE_FATAL = lazy(r"Assertion `[^`]{1,300}` failed|\bSegmentation fault\b|\bcore dumped\b|^Fatal Python error:|"
                     r"\bterminate called after throwing\b|device-side assert triggered")


def _raised(logs: list[LogEvidence]) -> bool:
    """An exception or a native fatal error ended the run: its traceback frames, its exception line, or a native
    assertion or fatal signal are in the log's tail.

    A user's Ctrl-C or a scheduler's kill (KeyboardInterrupt) is not the run failing by itself.
    """
    for log in logs:
        tail = (log.tail.lines if log.tail else [])[-400:]
        if any("KeyboardInterrupt" in x or _SIGINT_RAISED.search(x) for x in tail):
            continue
        since = (log.total_lines or 0) - len(tail)
        if any(t.exc_type != "SystemExit" and not interrupted(t.exc_type, t.message) and t.line_no > since for t in log.tracebacks) or \
                any(_FRAME.search(x) or _EXCEPTION.search(x) or _NATIVE_FATAL.search(x) for x in tail):
            return True
    return False
