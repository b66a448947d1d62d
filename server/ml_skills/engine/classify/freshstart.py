"""A resume that could not load its checkpoint and started over from scratch, then ran to its end: the run completed,
but not as the run it was meant to continue. The earlier attempt's steps are lost and the result is a new run (with a
changed model, when the checkpoint's shapes no longer fit it). That is a degraded run, not one that outlived a failure:
'No checkpoint found, starting from scratch' alone is a first start and says nothing; a load that failed, then the
fresh start, is the finding."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from ml_skills.engine.classify.confidence import ACCURACY
from ml_skills.engine.classify.signals import Signal
from ml_skills.engine.read import excerpts
from ml_skills.lazyre import lazy
from ml_skills.models import Classification, FailureClass, LogEvidence, RunStatus

# the trainer's own words for starting over (on the failure's line or within FRESH_WITHIN lines after it)
_FRESH = lazy(r"(?i)\b(?:(?:train(?:ing)?|start(?:ing)?|initiali[sz](?:e|ing)\s+(?:the\s+)?(?:model|weights|parameters))\s+from\s+scratch"
              r"|from\s+scratch\s+instead|starting\s+fresh|fresh\s+start|start(?:ing)?\s+over)\b")
_SHAPES = lazy(r"(?i)size mismatch|shape mismatch|torch\.Size\(|shape .{0,40}(?:does not|doesn't) match|incompatible shapes?")
FRESH_WITHIN = 3


def _lines_after(sig: Signal, logs: list[LogEvidence]) -> list[str]:
    """The signal's line and the FRESH_WITHIN lines after it, from the scanned file (its tail when it is not a file)."""
    log = next((lg for lg in logs if lg.source == sig.source), None)
    if log is None or sig.line_no is None:
        return [sig.text]
    with contextlib.suppress(OSError, ValueError):
        if Path(log.source).is_file():
            return excerpts.excerpt_around(log, sig.line_no, 0, FRESH_WITHIN).lines
    got = excerpts.excerpt_from_tail(log, sig.line_no, 0, FRESH_WITHIN)
    return got.lines if got is not None else [sig.text]


def resumed_from_scratch(cls: Classification, status: RunStatus, signals: list[Signal],
                         logs: list[LogEvidence]) -> tuple[Classification, RunStatus, list[Signal], bool]:
    """A completed run whose checkpoint load failed (an io-checkpoint line the run went on past) right before the
    trainer's own 'training from scratch': degraded, its cause the load's failure, a configuration change when the
    checkpoint's shapes do not fit the model (the load's lines then stand for that class). Returns the classification,
    the status, the signals and whether this reading was made."""
    if status is not RunStatus.COMPLETED or cls.primary is not FailureClass.IO_CHECKPOINT:
        return cls, status, signals, False
    loads = [s for s in signals if s.failure_class is FailureClass.IO_CHECKPOINT and s.kind in ("signature", "traceback")]
    fell_back = next((s for s in loads if any(_FRESH.search(x) for x in _lines_after(s, logs))), None)
    if fell_back is None:
        return cls, status, signals, False
    shapes = any(_SHAPES.search(s.text) for s in loads)
    primary = FailureClass.CONFIG_ERROR if shapes else FailureClass.IO_CHECKPOINT
    why = ("the resume could not load its checkpoint "
           + ("(its tensors' shapes do not fit the model: the model's configuration changed since it was written) " if shapes else "")
           + "and the trainer started over from scratch: the run completed, but as a new run - the earlier attempt's "
           "steps are lost")
    rest = [c for c in cls.contributing if c is not primary]
    # a reading of the run's course, not a line that names itself: no surer than the other readings of a run's shape
    conf = min(cls.confidence, ACCURACY["anomaly"])
    signals = [dataclasses.replace(s, failure_class=primary) if s in loads else s for s in signals]
    return (cls.model_copy(update={"primary": primary, "confidence": conf, "contributing": rest, "reasons": [*cls.reasons, why]}),
            RunStatus.DEGRADED, signals, True)
