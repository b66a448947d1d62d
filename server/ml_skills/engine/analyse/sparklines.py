"""A run's history as W&B prints it when the run finishes: one sparkline per metric.

wandb.finish() prints 'Run history:' with a line per metric ('wandb:  eval_loss ▁▁▂▃▄▅▆▇██'), each the whole run's
series scaled to eight levels, then 'Run summary:' with the last values. A log that holds no per-step lines of its
own (the trainer's bar only) still says there how its losses went: a validation loss that climbs to the top of its
range while the training loss falls to the bottom of its own is memorisation, as the metric lines would show.
"""

from __future__ import annotations

from ml_skills.lazyre import lazy
from ml_skills.models import ALIASES, Anomaly, AnomalyKind, FailureClass, Severity, canonical

_LEVELS = "▁▂▃▄▅▆▇█"
_SPARK = lazy(r"^wandb:\s+(?P<name>\S+) (?P<spark>[▁▂▃▄▅▆▇█]{4,})\s*$")
_SUMMARY = lazy(r"^wandb:\s+(?P<name>\S+) (?P<value>-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\s*$")
ROSE = 4  # levels of eight: from the bottom half of its range to the top


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
