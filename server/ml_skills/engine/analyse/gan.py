"""A GAN's two losses together: an adversarial game that stopped being played.

A GAN prints its generator's and discriminator's losses (`g_loss`, `d_loss`; `Loss_G`, `Loss_D`; `Gen_loss`,
`Dis_loss`), and no single `loss`, so the single-loss readings never see it. While the two networks train against
each other both losses move from one log to the next. One of them at exactly 0 log after log, or both fixed to every
printed digit, means one side wins outright or neither changes: the loser gets no useful gradient and the generator
learns nothing (mode collapse, a discriminator too strong for its generator, a saturated loss, too little data).
"""

from __future__ import annotations

from collections.abc import Sequence

from ml_skills.engine.analyse.frozen import FROZEN_DIGITS, FROZEN_LOGS, digits
from ml_skills.engine.analyse.points import at, finite, trailing_run
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, MetricPoint, Severity

SIDES = {"g_loss": "generator", "d_loss": "discriminator"}


def _logs(run: Sequence[tuple[MetricPoint, float]]) -> int:
    """Logs in a run of points: one printed step again (a bar redrawn) is not a new log."""
    marks = {(p.epoch, p.batch, p.step) for p, _ in run if p.step is not None or p.epoch is not None}
    return len(marks) + sum(1 for p, _ in run if p.step is None and p.epoch is None)


def adversaries_stuck(points: Sequence[MetricPoint]) -> Anomaly | None:
    """A generator or discriminator loss at exactly 0 at the last FROZEN_LOGS logs, or both losses the same to every
    printed digit (FROZEN_DIGITS or more for one of them) at the last FROZEN_LOGS logs."""
    runs: dict[str, list[tuple[MetricPoint, float]]] = {}
    for key in SIDES:
        s = [(p, p.values[key]) for p in points if key in p.values and finite(p.values[key])]
        if len(s) < FROZEN_LOGS:
            return None
        runs[key] = trailing_run(s)
    zero = [k for k, r in runs.items() if r[-1][1] == 0 and _logs(r) >= FROZEN_LOGS]
    frozen = all(_logs(r) >= FROZEN_LOGS for r in runs.values()) and \
        max(digits(r[-1][1]) for r in runs.values()) >= FROZEN_DIGITS
    if not zero and not frozen:
        return None
    key = zero[0] if zero else max(runs, key=lambda k: _logs(runs[k]))
    run = runs[key]
    first = run[0][0]
    other = runs["d_loss" if key == "g_loss" else "g_loss"][-1][1]
    what = (f"{SIDES[key]} loss exactly 0 at each of the last {_logs(run)} logs" if zero else
            f"generator loss {runs['g_loss'][-1][1]:g} and discriminator loss {runs['d_loss'][-1][1]:g} unchanged "
            f"to every printed digit at each of the last {min(_logs(r) for r in runs.values())} logs")
    return Anomaly(
        kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"{what} from {at(first)} (line {first.line_no})" + (f", the {SIDES['d_loss' if key == 'g_loss' else 'g_loss']} "
                f"loss at {other:g}" if zero else "") + ": the adversarial game stopped - one network wins outright or "
                "neither changes, so the generator gets no useful gradient (a discriminator too strong for its generator, "
                "a saturated loss, too little data, a learning rate too high for one side)"),
    )
