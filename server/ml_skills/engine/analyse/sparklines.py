"""A run's history as W&B prints it when the run finishes: one sparkline per metric.

wandb.finish() prints 'Run history:' with a line per metric ('wandb:  eval_loss ▁▁▂▃▄▅▆▇██'), each the whole run's
series scaled to eight levels, then 'Run summary:' with the last values. A log that holds no per-step lines of its
own (the trainer's bar only) still says there how its losses went: a validation loss that climbs to the top of its
range while the training loss falls to the bottom of its own is memorisation, as the metric lines would show.
"""

from __future__ import annotations

import math

from ml_skills.engine.analyse.chance import uniform_classes
from ml_skills.lazyre import lazy
from ml_skills.models import ALIASES, Anomaly, AnomalyKind, FailureClass, Severity, canonical

_LEVELS = "▁▂▃▄▅▆▇█"
_SPARK = lazy(r"^wandb:\s+(?P<name>\S+) (?P<spark>[▁▂▃▄▅▆▇█]{4,})\s*$")
_SUMMARY = lazy(r"^wandb:\s+(?P<name>\S+) (?P<value>-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\s*$")
ROSE = 4  # levels of eight: from the bottom half of its range to the top
CHANCE_LOSS_REL = 0.02  # a final loss within 2% of ln C...
CHANCE_ACC_REL = 0.3  # ...with a final accuracy within 30% of 1/C: no better than a guess
TRAINED_LOGS = 10  # history points the run logged: a run that trained, not one that stopped at its first steps


def _levels(spark: str) -> list[int]:
    return [_LEVELS.index(c) for c in spark]


def _series(tail: list[str], tail_start: int) -> tuple[dict[str, tuple[int, str]], dict[str, str]]:
    """Canonical metric -> (line, sparkline) from the last 'Run history:' block, and name -> last value printed."""
    sparks: dict[str, tuple[int, str]] = {}
    last: dict[str, str] = {}
    for i, text in enumerate(tail):
        if (m := _SPARK.match(text.rstrip())) is not None:
            name = m["name"].lower()
            c = canonical(name) or ALIASES.get(name.removeprefix("train/"))
            if c is not None:
                sparks[c] = (tail_start + i, text.strip())
        elif (m := _SUMMARY.match(text.rstrip())) is not None and canonical(m["name"].lower()) is not None:
            last[canonical(m["name"].lower()) or ""] = m["value"]
    return sparks, last


def wandb_history(tail: list[str], tail_start: int, source: str) -> Anomaly | None:
    """Train/validation divergence read from W&B's closing sparklines, or None."""
    if not any("Run history" in x for x in tail):
        return None
    sparks, last = _series(tail, tail_start)
    if "val_loss" not in sparks or "loss" not in sparks:
        return None
    val = _levels(sparks["val_loss"][1].split()[-1])
    train = _levels(sparks["loss"][1].split()[-1])
    low = min(range(len(val)), key=val.__getitem__)
    rose = low < len(val) - 1 and val[-1] - val[low] >= ROSE and val[-1] >= val[-2]
    fell = train[0] - train[-1] >= ROSE
    if not (rose and fell):
        return None
    line_no, text = sparks["val_loss"]
    values = f" (last {last['val_loss']} against a training loss of {last['loss']})" if {"val_loss", "loss"} <= last.keys() else ""
    return Anomaly(
        kind=AnomalyKind.TRAIN_VAL_DIVERGENCE, failure_class=FailureClass.EVALUATION_MISMATCH,
        severity=Severity.SIGNIFICANT, source=source, line_no=line_no,
        detail=(f"W&B's run history shows the validation loss climbing from the bottom to the top of its range "
                f"('{text}') while the training loss fell ('{sparks['loss'][1]}'){values}: memorisation - the model "
                "fits what it trains on and not the validation data (too little or unrepresentative training data, "
                "too many epochs)"),
    )


def _runs(tail: list[str], tail_start: int) -> list[tuple[int, dict[str, float]]]:
    """Each finished run's 'Run summary:' block as (its line, canonical metric -> last value), for the runs whose
    'Run history:' block above it holds TRAINED_LOGS points or more; a log may hold several runs one after another."""
    runs: list[tuple[int, dict[str, float]]] = []
    longest, block, values = 0, None, dict[str, float]()
    for i, text in enumerate(tail):
        line = text.rstrip()
        if line.endswith(("Run history:", "Run summary:")) and block is not None:
            runs.append((block, values))  # the run summed up above ends here
            block = None
        if line.endswith("Run history:"):
            longest = 0
        elif line.endswith("Run summary:"):
            block, values = (tail_start + i, {}) if longest >= TRAINED_LOGS else (None, {})
        elif (m := _SPARK.match(line)) is not None:
            longest = max(longest, len(m["spark"]))
        elif block is not None and (m := _SUMMARY.match(line)) is not None and (c := canonical(m["name"].lower())):
            values[c] = float(m["value"])
    if block is not None:
        runs.append((block, values))
    return runs


def wandb_chance(tail: list[str], tail_start: int, source: str) -> Anomaly | None:
    """A run W&B summed up at its end with a loss at ln C and an accuracy at 1/C for the same C, in every split it
    printed both for: after ten logged steps or more the classifier still guesses, whatever the framework."""
    for line_no, values in _runs(tail, tail_start):
        found: list[tuple[str, float, float, int] | None] = []
        for split in ("", "val_"):
            loss, acc = values.get(split + "loss"), values.get(split + "acc")
            if loss is None or acc is None:
                continue
            c = uniform_classes(loss, CHANCE_LOSS_REL)
            frac = acc / 100 if acc > 1 else acc
            found.append((split, loss, acc, c) if c is not None and abs(frac * c - 1) <= CHANCE_ACC_REL else None)
        chance = [f for f in found if f is not None]
        if not found or len(chance) < len(found) or len({f[3] for f in chance}) != 1:
            continue
        c = chance[0][3]
        shown = "; ".join(f"{'validation' if split else 'training'} loss {loss:g} and accuracy {acc:g}" for split, loss, acc, _ in chance)
        return Anomaly(
            kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.SIGNIFICANT,
            source=source, line_no=line_no,
            detail=(f"W&B's run summary (line {line_no}) ends at chance: {shown}, the loss of a uniform guess over {c} "
                    f"classes (ln {c} = {math.log(c):.4g}) and an accuracy of 1/{c}: after its logged steps the model "
                    "still guesses - a learning rate too high or too low for it, frozen or disconnected layers, or "
                    "labels that do not match the inputs"),
        )
    return None
