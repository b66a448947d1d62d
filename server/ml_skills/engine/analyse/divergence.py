"""A loss that blows up without (yet) becoming NaN: a rise that stays, a jump by orders of
magnitude, an absurd magnitude. Each is cited where the rise began, not at its peak; and training accuracy that collapses.
A loss that no longer moves at all is frozen.py's."""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Sequence

from ml_skills.engine.analyse.points import at, finite
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, MetricPoint, Severity


def loss_blowup(points: Sequence[MetricPoint]) -> Anomaly | None:
    s = [(p, p.values["loss"]) for p in points if "loss" in p.values and finite(p.values["loss"])]
    # no run starts at a loss of exactly 0: zeros before its first positive loss are an aborted launch's epoch that
    # trained no batch (appended above the run that resumed), not a low to rise from
    s = s[next((k for k, (_, v) in enumerate(s) if v != 0.0), len(s)) :]
    if len(s) < 8:
        return loss_climbing(s)
    vals = [v for _, v in s]
    # the low is read through a median of three neighbours: one lucky minibatch (a per-batch loss that dips to half
    # its level once) is noise, and measuring the rise from it turns ordinary batch-to-batch spread into a blow-up
    smooth = [statistics.median(vals[i - 1 : i + 2]) if 0 < i < len(vals) - 1 else v for i, v in enumerate(vals)]
    low_i = min(range(len(vals)), key=smooth.__getitem__)
    low = smooth[low_i]
    after = s[low_i + 1 :]
    if not after:
        return None
    p, high = max(after, key=lambda t: t[1])
    first = vals[0]
    tail = statistics.median(vals[-max(2, len(vals) // 10) :])
    floor = max(abs(low), 1e-3)
    if high > 3 * floor and high > first * 1.2 and tail > 2 * floor and _level_rose(vals, low_i):
        o = _blowup_onset(after, max(3 * floor, first * 1.2), 2 * floor) or p
        if _accuracy_held(points, o):
            return None
        between = [v for q, v in after if q.line_no < o.line_no]
        p, high = max(((q, v) for q, v in after if q.line_no >= o.line_no), key=lambda t: t[1])
        if between and max(between) >= high:
            return None  # the loss had already been as high between the low and the rise: per-batch spread (healthy 806)
        rise = "" if o is p else f"from {at(o)} (line {o.line_no}, {o.values['loss']:.4g}) "
        detail = f"loss fell to {low:.4g} then rose {rise}to {high:.4g} at {at(p)} (line {p.line_no}) "
        if (back := _coming_back(vals, [q for q, _ in s].index(p), low)) is not None:
            return Anomaly(
                kind=AnomalyKind.LOSS_BLOWUP, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.MINOR,
                source=o.source, line_no=o.line_no, step=o.step,
                detail=detail + (f"and has fallen at each of its {back} logs since (last {vals[-1]:.4g}): a spike the run is "
                                 "coming back from, not (yet) a divergence; watch that it returns to its level"))
        return Anomaly(
            kind=AnomalyKind.LOSS_BLOWUP, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
            severity=Severity.CRITICAL,
            source=o.source, line_no=o.line_no, step=o.step,
            detail=detail + f"and stays high (recent median {tail:.4g}, above its start {first:.4g}): divergence without NaN",
        )
    return loss_climbing(s)


COMING_BACK = 3  # falls in a row after a spike's peak, to the log's end, that make it a spike the run is recovering from


def _coming_back(vals: list[float], peak: int, low: float) -> int | None:
    """How many logs the loss has fallen at in a row since its peak, to the log's end, when they are at least COMING_BACK
    and have taken back a fifth of the rise: a loss spike the run recovers from (BigScience's 13B: 2.77 -> 8.72, then
    7.65, 7.19, 6.85; 'it took some 500 iterations to recover') reads so until its log ends. None otherwise."""
    after = vals[peak:]
    falls = len(after) - 1
    if falls < COMING_BACK or any(b >= a for a, b in itertools.pairwise(after)):
        return None
    return falls if vals[peak] - vals[-1] >= 0.2 * (vals[peak] - low) else None


CLIMBING = 4  # rises in a row, every log of a short excerpt, that make a climbing loss a divergence
CLIMBED = 1.5  # ... when the last is this many times the first


def loss_climbing(s: Sequence[tuple[MetricPoint, float]]) -> Anomaly | None:
    """A short excerpt (fewer logs than loss_blowup reads) whose positive loss rises at every log, CLIMBING times or more,
    to half again its first value at its end: the optimisation is diverging as the paste ends (BigScience's 104B: lm loss
    6.37, 6.60, 7.31, 9.12, 10.24 with the gradient norm at 283k; the run went to NaN). Only in an excerpt from past the
    run's start (its first log at a step above 0): a whole short run whose total loss climbs from step 0 is its objective's
    shape (healthy 765: a penalty that grows with its schedule while the fit's own losses fall), not a loss trained down
    and then lost."""
    vals = [v for _, v in s]
    if not CLIMBING < len(vals) < 8 or vals[0] <= 0 or vals[-1] < CLIMBED * vals[0] or any(b <= a for a, b in itertools.pairwise(vals)):
        return None
    if s[0][0].step is None or s[0][0].step <= 0:
        return None
    o, (p, last) = s[1][0], s[-1]
    return Anomaly(
        kind=AnomalyKind.LOSS_BLOWUP, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.CRITICAL,
        source=o.source, line_no=o.line_no, step=o.step,
        detail=(f"loss rose at every one of its {len(vals)} logs, from {vals[0]:.4g} to {last:.4g} at {at(p)} (line {p.line_no}), "
                "still rising where the log ends: diverging"),
    )


HELD = 0.9  # a training accuracy still at nine tenths of its best has not diverged


def _accuracy_held(points: Sequence[MetricPoint], onset: MetricPoint) -> bool:
    """The training accuracy printed beside the loss stayed near its best through the rise: the loss only moved
    within the noise of a model that fits its data (0.002 to 0.04 at 99.6% accuracy, a warm restart's bump).
    A diverging model loses its accuracy with its loss; with fewer than three accuracies after the onset, the loss
    decides alone."""
    before = [p.values["acc"] for p in points if "acc" in p.values and finite(p.values["acc"]) and p.line_no < onset.line_no]
    later = [p.values["acc"] for p in points if "acc" in p.values and finite(p.values["acc"]) and p.line_no >= onset.line_no]
    return bool(before) and len(later) >= 3 and max(before) > 0 and min(later) >= HELD * max(before)


def _level_rose(vals: list[float], low_i: int) -> bool:
    """The loss's level rose and stayed: the mean of its last window is twice the lowest mean of any window as long,
    or no value after the low ever came back within 3x of it, or none did for the last window or more of the log.

    Single values swing: a per-batch loss over two samples goes from 0.2 to 3.7 and back in a healthy run (healthy
    021). Means over windows of an eighth of the log (at least 3 logs) smooth that spread away; a blow-up moves them.
    A loss that jumps at its second step and then decays, still far above where it began, has no low window to rise
    from: that every later value stays far above the low is the rise (the lab's Adam at lr 3.0).
    """
    w = max(3, len(vals) // 8)
    if len(vals) < 2 * w:
        return True  # too few logs for two windows: the median checks above decide alone
    sums = [sum(vals[i : i + w]) for i in range(len(vals) - w + 1)]
    if sums[-1] / w > 2 * max(abs(min(sums) / w), 1e-3):
        return True
    bar = 3 * max(abs(vals[low_i]), 1e-3)
    later = vals[low_i + 1 :]
    if later and min(later) > bar:
        return True
    # a log that starts a few logs before the rise (a paste from mid-run) has no low window: the loss left the low's
    # neighbourhood and stayed above it for at least a window's worth of logs, to the end
    k = len(vals)
    while k > low_i + 1 and vals[k - 1] > bar:
        k -= 1
    return len(vals) - k >= w and any(v <= bar for v in vals[low_i + 1 : k])


def _blowup_onset(after: Sequence[tuple[MetricPoint, float]], high: float, stay: float) -> MetricPoint | None:
    """The first point of the rise that never came back: where the divergence began, not its peak.

    A blow-up is cited where it started (the first loss above `high` after which the loss never fell
    back below `stay`), so the quoted line is the step that went wrong first, as for any cascade.
    """
    low_after = list(itertools.accumulate((v for _, v in reversed(after)), min))[::-1]  # min of after[i:]
    return next((q for (q, v), m in zip(after, low_after) if v > high and m > stay), None)


def loss_jump(points: Sequence[MetricPoint]) -> Anomaly | None:
    """A loss that jumps by orders of magnitude in one logging interval and stays up.

    Needs only three points, so it also reads a short pasted excerpt: a finite loss that goes
    from its usual range to 100x its previous median (and never comes back below 10x) is an
    explosion whatever the log's length; a transient spike that recovers is left to the others.
    """
    s = [(p, p.values["loss"]) for p in points if "loss" in p.values and finite(p.values["loss"])]
    if len(s) < 3:
        return None
    low_after = list(itertools.accumulate((v for _, v in reversed(s)), min))[::-1]  # min of s[i:]
    seen = sorted(abs(v) for _, v in s[:2])  # |loss| before i, kept sorted: the median in O(1), insertion by bisect
    for i in range(2, len(s)):
        n = len(seen)
        base = seen[n // 2] if n % 2 else (seen[n // 2 - 1] + seen[n // 2]) / 2
        p, v = s[i]
        bisect.insort(seen, abs(v))
        if base > 0 and v > 100 * base and v > 10 and low_after[i] > 10 * base:
            peak = max(w for _, w in s[i:])
            return Anomaly(
                kind=AnomalyKind.LOSS_BLOWUP, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
                severity=Severity.CRITICAL, source=p.source, line_no=p.line_no, step=p.step,
                detail=(f"loss jumped from a median {base:.4g} to {v:.4g} at {at(p)} (line {p.line_no}) "
                        f"and stayed up (peak {peak:.4g}): the optimisation exploded (learning rate too high for this "
                        "phase, no gradient clipping, or a bad batch)"),
            )
    return None


ABSURD_LOSS = 1e20  # above any healthy objective: even an MSE on raw prices in the billions stays near 1e18
BLOWN = 1e6  # a loss and a gradient norm both above a million, log after log: the weights are far out of range
# a perplexity above ten million: a uniform guess over the vocabulary scores its size (no tokenizer holds 10M tokens),
# so the model does worse than guessing (OpenNMT caps its printed ppl at exp(100) = 2.7e43, a loss of 100 or more)
ABSURD_PPL = 1e7


def loss_absurd(points: Sequence[MetricPoint]) -> Anomaly | None:
    """A finite loss of astronomical size that never comes down: divergence even with no rise to see.

    A run whose loss exploded inside its first logging interval (or before the log's excerpt begins)
    shows no jump and no fall-then-rise, only a flat 3e31. No objective of a working run reaches
    1e20; when every recent value is above it, the optimisation diverged and never recovered.
    Below that, a loss in the millions alone can be a healthy objective's scale (an ELBO, a sum over
    a corpus), but not together with a gradient norm in the millions on the same lines: then the
    parameters are out of range and clipped updates no longer bring the loss down.
    """
    found = _absurd_tail(points)
    if found is None:
        return None
    p, v, last, why = found
    return Anomaly(
        kind=AnomalyKind.LOSS_BLOWUP, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
        severity=Severity.CRITICAL, source=p.source, line_no=p.line_no, step=p.step,
        detail=(f"{'perplexity' if 'perplexity' in why else 'loss'} is {v:.4g} at {at(p)} (line {p.line_no}) and stays above {why} to the end "
                f"(last {last:.4g}): the optimisation diverged and never recovered (learning rate, "
                "unnormalised inputs or targets, or a loss on the wrong scale)"),
    )


def _absurd_tail(points: Sequence[MetricPoint]) -> tuple[MetricPoint, float, float, str] | None:
    """The first point of the astronomical stretch, its loss, the last loss, and what made it astronomical."""
    # the training loss first: it is what the optimiser sees
    for key, limit, words in (("loss", ABSURD_LOSS, f"{ABSURD_LOSS:.0e}"), ("val_loss", ABSURD_LOSS, f"{ABSURD_LOSS:.0e}"),
                              ("ppl", ABSURD_PPL, f"a perplexity of {ABSURD_PPL:.0e}, worse than a uniform guess over any vocabulary")):
        s = [(p, p.values[key]) for p in points if key in p.values and finite(p.values[key])]
        # the last two logs (or tenth) of three or more: a run that blew up in its second report and died two reports
        # later has only two (1791: ppl 16,615, then 2e151 and 6e281 before math.exp overflowed)
        if len(s) >= 3 and all(abs(v) >= limit for _, v in s[-max(2, len(s) // 10):]):
            p, v = next((p, v) for p, v in s if abs(v) >= limit)
            return p, v, s[-1][1], words
    both = [(p, p.values["loss"], p.values["grad_norm"]) for p in points
            if finite(p.values.get("loss", math.nan)) and finite(p.values.get("grad_norm", math.nan))]
    tail = both[-max(1, len(both) // 10):]
    if both and all(abs(v) >= BLOWN and g >= BLOWN for _, v, g in tail):
        i = len(both) - len(tail)
        while i > 0 and abs(both[i - 1][1]) >= BLOWN and both[i - 1][2] >= BLOWN:
            i -= 1
        p, v, _ = both[i]
        return p, v, both[-1][1], f"{BLOWN:.0e}, its gradient norm too"
    return None


UNBOUNDED = -10.0  # far below zero: no cross-entropy, squared or absolute error gets there
UNBOUNDED_LOGS = 4  # falls in a row that do not slow down


def loss_unbounded(points: Sequence[MetricPoint]) -> Anomaly | None:
    """A loss that crossed below zero and keeps falling by as much each log, far below it: the objective has no
    floor. A working loss slows as it approaches its minimum; one that drops ~10 per epoch to -50 is maximising
    something without limit (an NLL fed raw scores instead of log-probabilities, a sign flipped, a log of an
    unnormalised density), so its falling says nothing about learning (SageMaker's 1397: 'Loss: -0.10', -10.2, ...
    -50.5 while test accuracy stays at 41-55%)."""
    for key in ("loss", "val_loss"):
        s = [(p, p.values[key]) for p in points if key in p.values and finite(p.values[key])]
        s = [x for i, x in enumerate(s) if i == 0 or x[1] != s[i - 1][1]]  # a line printed twice is one log
        if len(s) < UNBOUNDED_LOGS + 1 or s[-1][1] > UNBOUNDED:
            continue
        tail = [v for _, v in s[-(UNBOUNDED_LOGS + 1):]]
        falls = [a - b for a, b in itertools.pairwise(tail)]
        if min(falls) > 0 and min(falls) >= 0.5 * max(falls) and tail[0] <= 0:
            return _unbounded(key, s, falls)
    return None


def _unbounded(key: str, s: list[tuple[MetricPoint, float]], falls: list[float]) -> Anomaly:
    p = next(p for p, v in s if v < 0)
    name = "validation loss" if key == "val_loss" else "loss"
    return Anomaly(
        kind=AnomalyKind.LOSS_BLOWUP, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
        severity=Severity.CRITICAL, source=p.source, line_no=p.line_no, step=p.step,
        detail=(f"{name} went below zero at {at(p)} (line {p.line_no}) and falls by about {statistics.median(falls):.3g} "
                f"each log without slowing, to {s[-1][1]:.4g}: the objective has no floor (an NLL on raw scores instead "
                "of log-probabilities, a flipped sign), so the run optimises nothing useful"),
    )


COLLAPSE_TO = 0.2  # training accuracy under a fifth of its level (10 classes: from 90% to chance)...
COLLAPSE_STAYS = 0.3  # ...and never back above 30% of it
COLLAPSE_LEVEL = 0.3  # the level a run must have reached (of 1, or of 100) for its fall to mean anything


def accuracy_collapse(points: Sequence[MetricPoint]) -> Anomaly | None:
    """Training accuracy that falls from the level it had reached to near nothing in one logging interval and stays
    there: the weights were wrecked by an update (a loss that can reward a degenerate solution, a too-large step),
    whether or not the loss shows it (a distillation or contrastive loss may even fall). Needs three points before
    the fall and one after it, so it reads a pasted excerpt too."""
    s = [(p, p.values["acc"]) for p in points if "acc" in p.values and finite(p.values["acc"])]
    if len(s) < 5:
        return None
    scale = 100.0 if max(v for _, v in s) > 1.0 else 1.0
    high_after = list(itertools.accumulate((v for _, v in reversed(s)), max))[::-1]  # max of s[i:]
    for i in range(3, len(s) - 1):
        level = statistics.median(v for _, v in s[max(0, i - 10):i])
        p, v = s[i]
        if level >= COLLAPSE_LEVEL * scale and v < COLLAPSE_TO * level and high_after[i] < COLLAPSE_STAYS * level:
            return Anomaly(
                kind=AnomalyKind.ACCURACY_COLLAPSE, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
                severity=Severity.CRITICAL, source=p.source, line_no=p.line_no, step=p.step,
                detail=(f"training accuracy fell from {level:.4g} to {v:.4g} at {at(p)} (line {p.line_no}) and stayed "
                        f"under {high_after[i]:.4g} for the next {len(s) - i - 1} logged values: the training collapsed "
                        "(an update wrecked the weights: a learning rate too high for this phase, no gradient clipping, "
                        "or a loss a degenerate solution can satisfy)"),
            )
    return accuracy_zeroed(s)


ZEROED_LOGS = 4  # logs in a row, the run's last, with a training accuracy of exactly 0


def accuracy_zeroed(s: Sequence[tuple[MetricPoint, float]]) -> Anomaly | None:
    """Training accuracy printed as exactly 0, log after log to the end, after it was above 0: even a random guess
    scores 1/C, so no prediction matches any label - outputs that became NaN (every comparison false) or a prediction
    collapsed onto a class no sample has. Read from any level, unlike a collapse from a level reached (a run that
    never got far above chance, an ImageNet run at 0.002, falls to 0 as surely)."""
    n = 0
    while n < len(s) and s[-1 - n][1] == 0.0:
        n += 1
    if n < ZEROED_LOGS or n == len(s) or not any(v > 0 for _, v in s[: len(s) - n]):
        return None
    p, before = s[-n][0], s[-n - 1][1]
    return Anomaly(
        kind=AnomalyKind.ACCURACY_COLLAPSE, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
        severity=Severity.CRITICAL, source=p.source, line_no=p.line_no, step=p.step,
        detail=(f"training accuracy exactly 0 at each of the last {n} logs from {at(p)} (line {p.line_no}), after {before:.4g}: "
                "below any guess (chance is 1/C), so no prediction matches any label - outputs that became NaN or "
                "collapsed onto one class (a learning rate too high for the batch, labels outside the output range)"),
    )
