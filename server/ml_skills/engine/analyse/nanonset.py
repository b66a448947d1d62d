"""Where a run's losses first went non-finite, and what the series before it say about why.

The first NaN/inf of the loss, grad norm or validation loss, placed by the run's own counters (how early decides
between a setup problem and a late numerical one), with its precursor in numbers: a grad-norm jump, an lr jump, a
rising norm. A validation-only NaN beside a finite training loss is the evaluation's, not the optimisation's.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence

from ml_skills.engine.analyse.points import at, iterations_before
from ml_skills.engine.analyse.points import finite as _finite
from ml_skills.engine.analyse.points import fmt as _fmt
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, MetricPoint, NanOnset, Severity

EARLY_NAN_STEPS = 100
_VALIDATION = frozenset({"val_loss", "val_ppl"})  # an evaluation's own numbers


def nan_onset(points: Sequence[MetricPoint], exact_nan: MetricPoint | None) -> Anomaly | None:
    first = None
    for i, p in enumerate(points):
        bad: list[str] = [k for k in ("loss", "ppl", "grad_norm", "val_loss", "val_ppl") if k in p.values and not _finite(p.values[k])]
        if bad:
            first = (i, p, bad)
            break
    if exact_nan is not None and (first is None or exact_nan.line_no < first[1].line_no):
        bad = [k for k, v in exact_nan.values.items() if not _finite(v)] or ["loss"]
        idx = sum(1 for p in points if p.line_no < exact_nan.line_no)
        first = (idx, exact_nan, bad)
    if first is None:
        return _zeroed_for_good(points)
    i, p, bad = first
    zeroed = _zeroed_loss(points[i:]) if set(bad) <= _VALIDATION else None
    if set(bad) <= _VALIDATION and zeroed is None:
        later = [q.values["loss"] for q in points[i:] if "loss" in q.values]
        every = [q.values["loss"] for q in points if "loss" in q.values]
        # (a training loss of exactly 0 at every log is no finite training: a trainer that drops non-finite losses, or
        # a mean over no label, prints 0.0, and the evaluation's nan is the same fault seen unmasked)
        if later and all(_finite(v) for v in later) and any(v != 0 for v in every):
            # training stays finite while every evaluation says nan: the evaluation is broken, not the optimisation
            where = f"epoch {_fmt(p.epoch)}" if p.step is None and p.epoch is not None else f"step {_fmt(p.step)}"
            return Anomaly(
                kind=AnomalyKind.NAN_ONSET, failure_class=FailureClass.EVALUATION_MISMATCH, severity=Severity.SIGNIFICANT,
                source=p.source, line_no=p.line_no, step=p.step, onset=NanOnset.VALIDATION_ONLY,
                detail=(f"non-finite {', '.join(bad)} from {where} (line {p.line_no}) while the training loss stays finite "
                        f"({len(later)} values): the evaluation computes nan (an empty or unlabelled validation batch, a "
                        "division by zero in the metric, a preprocessing step only the validation split goes through)"),
            )
    stable = sum(1 for q in points[:i] if "loss" in q.values and _finite(q.values["loss"]))
    # how early, in the run's own counters (a global step, or an epoch and its iteration), never in log lines
    done = iterations_before(p, points[0] if points else None)
    where = at(p)
    if done is not None:
        early = done < EARLY_NAN_STEPS
        if p.step is None and p.batch is not None and done > p.batch:
            where += f" (~{_fmt(round(done))} iterations in)"
        unit = "steps" if p.step is not None else "iterations"
        # steps before this one: counted from 0 or 1 when the log starts there, else the counter itself (an excerpt
        # that starts at step 2454 comes after 2454 steps the run made)
        start = next((q.step for q in points if q.step is not None), None) if p.step is not None else None
        count = _fmt(p.step - start) if start is not None and p.step is not None and start <= 1 else _fmt(round(done))
    elif p.epoch is not None:
        # only epochs are logged: a NaN in a late epoch is late, however few lines the log holds; and a step counter
        # printed before it by another logger of the run (or left out of a sampled log) says how far in it is
        prior = max((q.step for q in points[:i] if q.step is not None), default=None)
        early = (p.epoch <= 1 and stable < EARLY_NAN_STEPS and (prior is None or prior < EARLY_NAN_STEPS)
                 and (p.batch is None or p.batch < EARLY_NAN_STEPS))  # 'Epoch 1, batch 8500': already far in
        unit, count = "logged steps", str(stable)
    else:
        early = None  # the log prints no counter: how far into the run this is cannot be read from it
        unit, count = "logged losses", str(stable)
    lr = p.values.get("lr") if p.values.get("lr") is not None else next(
        (q.values["lr"] for q in reversed(points[:i]) if "lr" in q.values and _finite(q.values["lr"])), None)
    at_lr = f" at lr {lr:.3g}" if lr is not None else ""
    onset, why = _onset_words(points, i, p, early, f"{count} stable {unit}", f"{count} finite {unit}", at_lr)
    if zeroed is not None:
        why += (f"; the training loss then logs exactly 0 (line {zeroed.line_no}) after a positive value, which is how a "
                "logger that drops non-finite losses from its average (HF Trainer's logging_nan_inf_filter) shows a "
                "window of steps that were all nan")
    return Anomaly(
        kind=AnomalyKind.NAN_ONSET, failure_class=FailureClass.NAN_INF, severity=Severity.CRITICAL,
        source=p.source, line_no=p.line_no, step=p.step, onset=onset,
        detail=f"first non-finite {', '.join(bad)} at {where} (line {p.line_no}), {why}",
    )


def _onset_words(points: Sequence[MetricPoint], i: int, p: MetricPoint, early: bool | None, stable: str, finite: str,
                 at_lr: str) -> tuple[NanOnset, str]:
    """Why the first NaN at points[i] happened, as far as the series before it tell: early in the run, after a
    grad-norm jump, after the lr jumped, after a rising grad norm, or with no warning; and in words."""
    jump = _precursor(points, i, p)
    if early is False and not any("loss" in q.values and _finite(q.values["loss"]) for q in points[:i]):
        # the log's first loss is already non-finite (an excerpt, a log cut at its start): nothing before it to read
        return NanOnset.NOT_PLACED, (f"the first loss this log shows, {finite.replace('finite ', '')} into the run: the steps before it are not "
                "in the log, so whether a warning came before cannot be told from it")
    if early:
        # the measured jump is cited too, first, so a shortened quote keeps it: same history, same evidence
        jumped = f", {PRECURSOR_WORDS} ({jump})" if jump is not None else ""
        return NanOnset.EARLY, (f"within the first 100 steps{jumped}: points to the learning rate (no warmup), precision "
                "(fp16 overflow) or unscaled inputs rather than one bad sample")
    if jump is not None and (lr_jump := _lr_jump(points, i)) is not None:
        return NanOnset.LEARNING_RATE_JUMP, (f"after {stable}, with the learning rate {lr_jump}, then {PRECURSOR_WORDS} ({jump}): the "
                "step size jumped (a schedule that multiplies instead of decaying, a warmup or cycle restarting, a wrong "
                "lr on resume) and the gradient exploded with it")
    if jump is not None:
        return NanOnset.GRADIENT_EXPLOSION, (f"after {stable}, {PRECURSOR_WORDS} ({jump}){at_lr}: an exploding "
                "gradient (learning rate too high for this phase, no clipping, or an fp16 overflow)")
    if (lr_jump := _lr_jump(points, i)) is not None:
        return NanOnset.LEARNING_RATE_JUMP, (f"after {stable}, with the learning rate {lr_jump}: the step size jumped (a schedule "
                "that multiplies instead of decaying, a warmup or cycle restarting, a wrong lr on resume), not the data")
    if _gn_rising(points, i):
        return NanOnset.GRADIENT_EXPLOSION, (f"after {stable}, with the gradient norm rising before it{at_lr}: an exploding "
                "gradient (learning rate too high for this phase, no clipping)")
    if early is None:
        return NanOnset.NOT_PLACED, (f"after {finite}; the log prints no step or epoch counter, so how far into the run "
                "cannot be told from it (no warning rise in gradient norm)")
    return NanOnset.NO_WARNING, (f"after {stable} with no warning rise in gradient norm{at_lr}: a corrupt late "
            "batch or a numerically unsafe op on rare inputs")


def _zeroed_loss(points: Sequence[MetricPoint]) -> MetricPoint | None:
    """A training loss of exactly 0 logged right after a positive one: the steps behind it were non-finite and dropped.

    No objective of a run that was at 1.5 reaches exactly 0.0 in one logging interval; a logger that skips nan/inf
    losses when it averages them (HF Trainer's default logging_nan_inf_filter) logs 0.0 for a window of only nan steps.
    """
    prev = None
    for q in points:
        v = q.values.get("loss")
        if v is None or not _finite(v):
            continue
        if v == 0.0 and prev is not None and prev >= 0.1:
            return q
        prev = v
    return None


ZEROED_LOGS = 2  # logs of exactly 0 after the drop, to the end


def _zeroed_for_good(points: Sequence[MetricPoint]) -> Anomaly | None:
    """No NaN printed, but the training loss drops from a real value to exactly 0 in one log and stays there: every
    step behind those logs was non-finite and dropped by the logger's average (HF Trainer's logging_nan_inf_filter
    prints 0.0 for a window of only nan steps; DeepSpeed then reports most steps skipped for overflow)."""
    zero = _zeroed_loss(points)
    if zero is None:
        return None
    later = [q.values["loss"] for q in points if q.line_no >= zero.line_no and "loss" in q.values]
    if len(later) < ZEROED_LOGS or any(v != 0.0 for v in later):
        return None
    return Anomaly(
        kind=AnomalyKind.NAN_ONSET, failure_class=FailureClass.NAN_INF, severity=Severity.CRITICAL,
        source=zero.source, line_no=zero.line_no, step=zero.step, onset=NanOnset.LOGGED_AS_ZERO,
        detail=(f"the training loss is logged as exactly 0 from {at(zero)} (line {zero.line_no}) to the end ({len(later)} "
                "logs) right after a positive value: no objective falls to exactly 0 in one logging interval; a logger "
                "that drops non-finite losses from its average (HF Trainer's logging_nan_inf_filter) prints 0 for "
                "windows of steps that were all nan"),
    )


PRECURSOR_WORDS = "with the gradient norm exploding just before it"
PRECURSOR_POINTS = 20  # how far before the first NaN a grad-norm jump counts as its precursor
PRECURSOR_RATIO = 10.0


LR_JUMP_RATIO = 5.0  # a learning rate multiplied by this or more between two logs just before the first NaN


def _lr_jump(points: Sequence[MetricPoint], i: int) -> str | None:
    """'rising 0.3 -> 3 (10x) between step 13900 and step 14005': the lr's rise in the PRECURSOR_POINTS logs before
    the first NaN (on a sampled log, between the two kept logs around it)."""
    lrs = [(q, q.values["lr"]) for q in points[max(0, i - PRECURSOR_POINTS) : i + 1]
           if "lr" in q.values and _finite(q.values["lr"]) and q.values["lr"] > 0]
    for (q0, v0), (q1, v1) in itertools.pairwise(lrs):
        if v1 >= LR_JUMP_RATIO * v0:
            return f"rising {v0:.3g} -> {v1:.3g} ({v1 / v0:.0f}x) between {at(q0)} and {at(q1)}"
    return None


def _gn_rising(points: Sequence[MetricPoint], i: int) -> bool:
    prior = [q.values["grad_norm"] for q in points[max(0, i - 20) : i] if "grad_norm" in q.values and _finite(q.values["grad_norm"])]
    base = [q.values["grad_norm"] for q in points[: max(1, i - 20)] if "grad_norm" in q.values and _finite(q.values["grad_norm"])]
    return bool(prior and base and max(prior) > 5 * statistics.median(base))


def precursor_point(points: Sequence[MetricPoint], i: int) -> tuple[MetricPoint, float, MetricPoint] | None:
    """The grad-norm jump that preceded the first NaN at points[i]: (the point before the jump, its norm, the jump).

    The first finite norm, in the PRECURSOR_POINTS points before the NaN (or on its own line), that is
    PRECURSOR_RATIO times the norm logged before it: the gradient exploded there and the NaN followed.
    """
    gn = [(q, q.values["grad_norm"]) for q in points[max(0, i - PRECURSOR_POINTS) : i + 1]
          if "grad_norm" in q.values and _finite(q.values["grad_norm"])]
    for (q0, v0), (q1, v1) in itertools.pairwise(gn):
        if v0 > 0 and v1 >= PRECURSOR_RATIO * v0:
            return q0, v0, q1
    return None


def _precursor(points: Sequence[MetricPoint], i: int, nan: MetricPoint) -> str | None:
    """The precursor in words, with its numbers: 'grad_norm 12.4 -> 2782 at step 1432, 1 step before the first NaN'."""
    found = precursor_point(points, i)
    if found is None:
        return None
    _, v0, q1 = found
    v1 = q1.values["grad_norm"]
    if q1.step is not None and nan.step is not None:
        gap = nan.step - q1.step
        before = "on the same step as the first NaN/inf" if gap == 0 else f"{_fmt(gap)} step{'s' if gap != 1 else ''} before the first NaN/inf"
    else:
        gap = sum(1 for q in points[: i + 1] if q.line_no > q1.line_no)
        before = "on the first NaN/inf's line" if gap == 0 else f"{gap} log{'s' if gap != 1 else ''} before the first NaN/inf"
    return f"grad_norm {v0:.4g} -> {v1:.5g} at {at(q1)}, {before}"
