"""How lines logged as warnings count: below an ending that is no warning, and as the last account of a run whose log
lost its ending (cut inside a traceback, or stopping a few lines after the warning)."""

from __future__ import annotations

from ml_skills.engine.analyse.cuttraceback import ends_in_traceback
from ml_skills.engine.classify.signals import MIN_PRIMARY, WARNING_DAMP, Signal
from ml_skills.lazyre import lazy
from ml_skills.models import LogEvidence, Role


def damp_warnings(signals: list[Signal]) -> None:
    """Warnings yield to an ending: when a line that is no warning and was not survived (a scheduler's kill, an
    exception, a signal) is there, lines logged as warnings (however many: a compiler warning repeated per graph
    break) cannot outrank it."""
    if any(s.kind in ("signature", "traceback") and s.role is not Role.HINT and not s.warning and not s.survived for s in signals):
        for s in signals:
            if s.warning:
                s.weight *= WARNING_DAMP


_WARNING_LEVEL = lazy(r"\bWARN(?:ING)?\b|\] W |^W\d{4} ")
LAST_WORDS = 12  # lines a log may print after a failure warning that still make it the log's last account


def _last_words(log: LogEvidence, warning: Signal) -> bool:
    """The log stops within LAST_WORDS lines of this WARNING-level line (not INFO: a launcher's 'received SIGINT,
    exiting' is a person's stop) and no progress line came after it."""
    at = warning.line_no or 0
    lp = log.trajectory.last_progress
    return at >= (log.total_lines or 0) - LAST_WORDS and (lp is None or lp.line_no < at) and \
        _WARNING_LEVEL.search(warning.text) is not None


def warning_before_a_lost_error(signals: list[Signal], logs: list[LogEvidence]) -> None:
    """A log cut inside a traceback, before its exception line, lost the error that ended the run; one that stops a
    few lines after a failure warning shows no more. When nothing else could name a class, that last failure line
    logged as a warning, that no training progress
    followed (fairseq's 'OOM: Ran out of memory ...' then 'attempting to recover from OOM' and the traceback; PyTorch's
    'None of the inputs have requires_grad=True' then the trainer's), is the nearest account of that error: it is
    named, with the capped confidence of a verdict that rests on where the log stops."""
    if any(not s.warning and not s.survived and s.role is not Role.HINT and s.kind != "stop" and s.weight >= MIN_PRIMARY
           for s in signals):
        return
    for log in logs:
        near = [s for s in signals if s.source == log.source and s.kind == "signature" and s.warning and not s.survived
                and s.role is Role.CAUSE and s.line_no is not None]
        if not near:
            continue
        last = max(near, key=lambda s: s.line_no or 0)
        # or the log stops within a few lines of it, with no progress after (fairseq's OOM warning and the memory
        # summary it prints, then nothing): the warning is the last thing the run said
        if ends_in_traceback(log) or _last_words(log, last):
            last.weight, last.inferred = max(last.weight, MIN_PRIMARY), True
