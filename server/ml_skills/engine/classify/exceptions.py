"""The failure class of a traceback's final exception, from the catalog's exception rules.

A critical signature on the exception's line decides first; then where it was raised (a
TypeError inside save_model is a checkpoint failure); then its type and message. A chained pair
is read with the wrapper's frames as the trigger's callers.
"""

from __future__ import annotations

from ml_skills.catalog.loader import compiled_exception_rules
from ml_skills.engine.read.tracebacks import interrupted as was_interrupted
from ml_skills.models import FailureClass, Role, Severity, SignatureHit, TracebackEvent


def traceback_class(tb: TracebackEvent, hits_by_line: dict[tuple[str, int], list[SignatureHit]]) -> tuple[FailureClass | None, float, str]:
    """Class of a traceback's final exception: (class, rule weight, rule id)."""
    line_hits = hits_by_line.get((tb.source, tb.line_no), [])
    for h in line_hits:
        if h.role is Role.CAUSE and h.severity is Severity.CRITICAL:
            return h.failure_class, 1.0, h.signature_id
    frames = "\n".join(tb.frames)
    # a Ctrl-C is raised wherever the process happened to be waiting: its frames say where, not what failed (torchrun's
    # SignalException for SIGINT is the same Ctrl-C, read as KeyboardInterrupt)
    interrupted = was_interrupted(tb.exc_type, tb.message)
    if interrupted and not tb.exc_type.endswith("KeyboardInterrupt"):
        return None, 0.0, ""  # the launcher's agent, which always waits in its monitor loop: no word on its workers
    typed = f"{tb.exc_type}"
    if typed.rsplit(".", 1)[-1] == "SignalException":
        # the agent got a signal (SIGTERM, SIGHUP) where it always waits, its monitor loop in torch/distributed/: its
        # frames are no collective; the signal line's own signature says what stopped it
        named = next((h for h in line_hits if h.role is Role.CAUSE), None)
        return (named.failure_class, 0.9, named.signature_id) if named is not None else (None, 0.0, "")
    for rule, rx_type, rx_msg, rx_frames in compiled_exception_rules():
        if rx_frames is None or (interrupted and "KeyboardInterrupt" not in rule.exc_type):
            continue  # a Ctrl-C's frames say only whether it was waiting (a hang), not what failed
        if rx_type.fullmatch(typed) and rx_msg.search(tb.message) and rx_frames.search(frames):
            named = next((h for h in line_hits if h.role is Role.CAUSE), None)
            if named is not None and rule.exc_type == ".*" and rule.failure_class is FailureClass.CONFIG_ERROR and not interrupted:
                # 'raised in evaluation (or argument) code, so something there is misconfigured' is the weakest reading
                # of where: it yields to a signature naming the exception's own words (sklearn's 'Number of classes in
                # y_true not equal ...' raised in evaluation code is a metric that cannot be computed)
                return named.failure_class, 0.9, named.signature_id
            return rule.failure_class, rule.weight, rule.id
    for h in line_hits:
        if h.role is Role.CAUSE:
            return h.failure_class, 0.9, h.signature_id
    short = typed.rsplit(".", 1)[-1]
    for rule, rx_type, rx_msg, rx_frames in compiled_exception_rules():
        if rx_frames is not None:
            continue
        if (rx_type.fullmatch(typed) or rx_type.fullmatch(short)) and rx_msg.search(tb.message):
            return rule.failure_class, rule.weight, rule.id
    return None, 0.0, ""


CHAIN_GAP = 4  # lines between an exception and the chain marker plus the next 'Traceback' header


def callers_of_chained(tbs: list[TracebackEvent]) -> dict[int, TracebackEvent]:
    """An exception that another one wraps, seen with the wrapper's frames as its callers.

    Python prints a chained pair as two tracebacks: the first (the trigger) often shows only the
    innermost frame, e.g. `tree_get`; the second, raised `from` it or while handling it, shows the
    calls that led there (`paligemma.load` -> `load_params`). Those frames are the first one's
    callers too, so where-it-was-raised rules (a checkpoint load, a data loader) read both.
    """
    out: dict[int, TracebackEvent] = {}
    for i in range(len(tbs) - 1):
        inner, outer = tbs[i], tbs[i + 1]
        if outer.chained and outer.source == inner.source and 0 < outer.start_line - inner.line_no <= CHAIN_GAP:
            out[i] = inner.model_copy(update={"frames": [*outer.frames, *inner.frames]})
    return out
