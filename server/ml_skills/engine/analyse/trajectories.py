"""Detect what metric series say about a run: NaN onset, spikes, blow-ups, memorisation, leakage.

Input is every MetricPoint the scan kept (sampled on huge logs); the exact events that must not
be lost to sampling (the first NaN line, the largest grad-norm) are also recorded by the scan
and passed in. Thresholds are the field's rules of thumb, stated next to each detector.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ml_skills.engine.analyse.boxloss import box_loss_zero
from ml_skills.engine.analyse.chance import loss_collapsed, predicting_the_prior
from ml_skills.engine.analyse.divergence import (
    accuracy_collapse,
    loss_absurd,
    loss_blowup,
    loss_jump,
    loss_unbounded,
)
from ml_skills.engine.analyse.frozen import accuracy_frozen, loss_frozen, loss_replayed, loss_zero
from ml_skills.engine.analyse.gan import adversaries_stuck
from ml_skills.engine.analyse.lrzero import learning_rate_zero
from ml_skills.engine.analyse.nanonset import PRECURSOR_WORDS, nan_onset
from ml_skills.engine.analyse.points import finite as _finite
from ml_skills.engine.analyse.points import fmt as _fmt
from ml_skills.engine.analyse.points import since_counter_reset
from ml_skills.engine.analyse.stillpredictions import predictions_still
from ml_skills.engine.analyse.trainval import train_val
from ml_skills.models import (
    Anomaly,
    AnomalyKind,
    FailureClass,
    MetricPoint,
    ProgressPoint,
    SeriesSummary,
    Severity,
    Task,
    Trajectory,
)

MAX_POINTS = 200


def _trend(values: list[float]) -> str:
    vals = [v for v in values if _finite(v)]
    if len(vals) < 4:
        return "too-short"
    q = max(1, len(vals) // 4)
    head = statistics.median(vals[:q])
    tail = statistics.median(vals[-q:])
    spread = statistics.pstdev(vals) or 1e-12
    scale = max(abs(head), abs(tail), 1e-12)
    change = (tail - head) / scale
    if abs(change) < 0.05:
        return "noisy" if spread / scale > 0.5 else "flat"
    return "falling" if change < 0 else "rising"


def _downsample(xy: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Keep at most MAX_POINTS points, always keeping first, last, min, max and non-finite ones."""
    if len(xy) <= MAX_POINTS:
        return xy
    keep = {0, len(xy) - 1}
    finite = [i for i, (_, v) in enumerate(xy) if _finite(v)]
    if finite:
        keep.add(min(finite, key=lambda i: xy[i][1]))
        keep.add(max(finite, key=lambda i: xy[i][1]))
    keep.update(i for i, (_, v) in enumerate(xy) if not _finite(v))
    stride = len(xy) / (MAX_POINTS - len(keep))
    keep.update(int(k * stride) for k in range(MAX_POINTS - len(keep)))
    return [xy[i] for i in sorted(keep)][: MAX_POINTS + 8]


def _series(points: Sequence[MetricPoint], name: str) -> list[tuple[float, float, MetricPoint]]:
    out = []
    for i, p in enumerate(points):
        if name in p.values:
            x = p.step if p.step is not None else float(i)
            out.append((x, p.values[name], p))
    return out


def summarise(points: Sequence[MetricPoint]) -> list[SeriesSummary]:
    names = sorted({k for p in points for k in p.values})
    out = []
    for name in names:
        s = _series(points, name)
        vals = [v for _, v, _ in s]
        fin = [v for v in vals if _finite(v)]
        out.append(
            SeriesSummary(
                name=name,
                split="eval" if name.startswith("val_") else "train",
                count=len(s),
                first=vals[0] if vals else None,
                last=vals[-1] if vals else None,
                min=min(fin) if fin else None,
                max=max(fin) if fin else None,
                trend=_trend(vals),
                points=[(x, v if _finite(v) else None) for x, v in _downsample([(x, v) for x, v, _ in s])],
            )
        )
    return out


def _spike_passed(points: Sequence[MetricPoint], norms: list[tuple[MetricPoint, float]], spike: MetricPoint, med: float) -> bool:
    """One spike the run trained far past: 20+ readings after it, the gradient norm back near its median and the loss
    below where it stood before the spike. Clipping absorbed it: reported as minor, never how the run failed alone."""
    later = [v for q, v in norms if q.line_no > spike.line_no]
    losses = [(q.line_no, q.values["loss"]) for q in points if "loss" in q.values and _finite(q.values["loss"])]
    before = [v for n, v in losses if n < spike.line_no]
    after = [v for n, v in losses if n > spike.line_no]
    if len(later) < 20 or len(before) < 3 or len(after) < 20:
        return False
    tail = later[-max(5, len(later) // 4):]
    return statistics.median(tail) < 3 * med and statistics.median(after[-max(5, len(after) // 4):]) < statistics.median(before)


def _grad_spike(points: Sequence[MetricPoint], exact_max: MetricPoint | None) -> Anomaly | None:
    s = [(p, p.values["grad_norm"]) for p in points if "grad_norm" in p.values and _finite(p.values["grad_norm"])]
    if (exact_max is not None and "grad_norm" in exact_max.values and _finite(exact_max.values["grad_norm"])
            and all(p.line_no != exact_max.line_no for p, _ in s)):  # a non-finite norm is the NaN onset's, not a spike
        s.append((exact_max, exact_max.values["grad_norm"]))
        s.sort(key=lambda t: t[0].line_no)
    if len(s) < 8:
        return None
    med = statistics.median(v for _, v in s)
    # gradient norms start high and fall while the loss drops from its value at initialisation:
    # the first tenth of the series is that phase, not a spike
    p, top = max(s[len(s) // 10 :], key=lambda t: t[1])
    if med <= 0 or top < 10 * med or top < 1.0:
        return None
    passed = _spike_passed(points, s, p, med)
    return Anomaly(
        kind=AnomalyKind.GRAD_SPIKE, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
        severity=Severity.MINOR if passed else Severity.SIGNIFICANT if top < 100 * med else Severity.CRITICAL,
        source=p.source, line_no=p.line_no, step=p.step,
        detail=f"largest grad_norm {top:.4g} at step {_fmt(p.step)} (line {p.line_no}) is {top / med:.0f}x the median {med:.3g}"
               + ("; training went on past it (the norm back near its median, the loss below where it was)" if passed else ""),
    )


def _throughput_collapse(points: Sequence[MetricPoint]) -> Anomaly | None:
    s = [(p, p.values["throughput"]) for p in points if "throughput" in p.values and _finite(p.values["throughput"])]
    if len(s) < 12:
        return None
    vals = [v for _, v in s]
    half = statistics.median(vals[: len(vals) // 2])
    q = max(3, len(vals) // 5)
    recent = statistics.median(vals[-q:])
    if half > 0 and recent < 0.4 * half:
        losses = [p.values["loss"] for p, _ in s if "loss" in p.values and _finite(p.values["loss"])]
        stable = len(losses) < 4 or _trend(losses) in ("flat", "falling", "noisy")
        p = s[-q][0]
        return Anomaly(
            kind=AnomalyKind.THROUGHPUT_COLLAPSE, failure_class=FailureClass.STALLED, severity=Severity.SIGNIFICANT,
            source=p.source, line_no=p.line_no, step=p.step,
            detail=(f"throughput fell from a median {half:.4g} to {recent:.4g} ({recent / half:.0%})"
                    + (" while loss stayed stable: an input-pipeline, I/O or host bottleneck, not the model" if stable else "")),
        )
    return None


def _detect(points: Sequence[MetricPoint], exact_nan: MetricPoint | None, exact_grad_max: MetricPoint | None,
            task: Task | None) -> list[Anomaly]:
    anomalies: list[Anomaly] = []
    nan = nan_onset(points, exact_nan)
    if nan:
        anomalies.append(nan)
    run = since_counter_reset(points)  # a rise is read within the last run the counters show, not across a relaunch
    blowup = None if nan else (loss_blowup(run) or loss_jump(run) or loss_absurd(run) or loss_unbounded(run) or learning_rate_zero(points) or loss_frozen(points) or accuracy_frozen(points) or loss_zero(points) or box_loss_zero(points) or loss_collapsed(points) or loss_replayed(points)
                               or predicting_the_prior(points) or predictions_still(points)
                               or adversaries_stuck(run))
    # a grad-norm jump just before the NaN is the NaN's precursor, cited in its finding with its numbers: one event,
    # not a second failure competing with it (the same history gives the same answer from a log or a tracker)
    spike = None if nan is not None and PRECURSOR_WORDS in nan.detail else _grad_spike(points, exact_grad_max)
    collapse = None if nan or blowup else accuracy_collapse(points)
    for det in (spike, blowup, collapse, _throughput_collapse(points)):
        if det:
            anomalies.append(det)
    anomalies.extend(train_val(run, task))  # a relaunch's validation loss starts over: read within the last run
    return anomalies


def by_rank(points: Sequence[MetricPoint]) -> dict[int | None, list[MetricPoint]]:
    """The points of each rank, when several ranks' metric lines are interleaved in one log."""
    groups: dict[int | None, list[MetricPoint]] = {}
    for p in points:
        groups.setdefault(p.rank, []).append(p)
    return groups


def analyse(
    points: Sequence[MetricPoint],
    *,
    exact_nan: MetricPoint | None = None,
    exact_grad_max: MetricPoint | None = None,
    last_progress: ProgressPoint | None = None,
    task: Task | None = None,
) -> Trajectory:
    """Summarise the series and run every detector, on each rank's own series when ranks share the log.

    Four ranks' losses interleaved line by line are four series, each on its own data shard: read as one,
    the per-batch differences between ranks look like a loss jumping up and down. Each rank's series is
    analysed alone and an anomaly is kept once per kind, from the rank where it shows first.
    """
    groups = {r: g for r, g in by_rank(points).items() if r is not None}
    if len(groups) < 2:
        anomalies = _detect(points, exact_nan, exact_grad_max, task)
        shown = points
    else:
        found: dict[AnomalyKind, Anomaly] = {}
        # lines with no rank prefix (the trainer's own summaries, a NaN dict) are a series of their own, not dropped
        everyone: dict[int | None, list[MetricPoint]] = {r: g for r, g in groups.items()}
        if unranked := by_rank(points).get(None):
            everyone[None] = unranked
        for rank, g in sorted(everyone.items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
            nan = exact_nan if exact_nan is not None and exact_nan.rank == rank else None
            gmax = exact_grad_max if exact_grad_max is not None and exact_grad_max.rank == rank else None
            for a in _detect(g, nan, gmax, task):
                a = a.model_copy(update={"detail": f"rank {rank}: {a.detail}"}) if rank is not None else a
                if a.kind not in found or (a.line_no or 0) < (found[a.kind].line_no or 0):
                    found[a.kind] = a
        anomalies = list(found.values())
        shown = groups[min(groups)]  # the series shown: the lowest rank's (rank 0, the one loggers usually keep)
    nan_a = next((a for a in anomalies if a.kind is AnomalyKind.NAN_ONSET), None)
    steps = [p.step for p in points if p.step is not None]
    return Trajectory(
        series=summarise(shown),
        anomalies=anomalies,
        last_step=steps[-1] if steps else None,
        first_nan_step=nan_a.step if nan_a else None,
        first_nan_line=nan_a.line_no if nan_a else None,
        last_progress=last_progress,
        metric_lines=len(points),
    )
