"""Metric tables: a header line of column names, then one row of numbers per epoch or step.

Chainer's PrintReport (`epoch  main/loss  validation/main/loss  main/accuracy ...`), Flair's loss.tsv
(`EPOCH<TAB>TIMESTAMP<TAB>...<TAB>TRAIN_LOSS<TAB>DEV_LOSS<TAB>DEV_F1`) and Keras' CSVLogger
(`epoch,loss,accuracy,val_loss,val_accuracy`) print their metrics this way. A row holds no metric name,
so a line-at-a-time reader sees bare numbers; the header gives each column its meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

from ml_skills.lazyre import lazy
from ml_skills.models import EPOCH_KEYS, STEP_KEYS, canonical

_NAME = lazy(r"[A-Za-z][\w/.\-]*$")
_WORDS = lazy(r"[/_.\-]+")
# a row's bar: one space before its percentage, the rest of the spaces (and a colon) found by rstrip. `:?\s+\d{1,3}%\|`
# read each run of spaces to its end from every space of it: a row of 60,000 spaces held the CLI 35 s (twenty-third round)
_BAR = lazy(r"\s\d{1,3}%\|")
_OF = lazy(r"(?P<n>\d+)/\d+$")
_NUMBER = lazy(r"\d+(?:\.\d+)?$")
_MEM_UNITS = {"G": 1024.0, "M": 1.0}
_VAL = {"val", "valid", "validation", "eval", "evaluation", "test", "dev"}
_QUALIFIERS = {"main", "train", "training", "sparse", "categorical", "binary", "avg", "mean", "total"}
_BASE = {"loss": "loss", "acc": "acc", "accuracy": "acc", "top1": "acc", "f1": "acc", "lr": "lr", "learning_rate": "lr"}
MAX_COLUMNS = 64
PART_LOSS = "part_loss"  # a column holding one term of the loss; a row's terms sum to its loss
MAX_ROWS = 100_000  # per table: a header followed by more numbers than any report prints is not one


@dataclass(frozen=True)
class Header:
    sep: str | None  # None: runs of whitespace
    keys: tuple[str | None, ...]  # canonical metric name, "step", "epoch", or None for a column we do not read


def _split(line: str, sep: str | None) -> list[str]:
    return [t.strip() for t in line.strip().split(sep)] if sep else line.split()


def column(name: str) -> str | None:
    """The canonical meaning of one column name: `validation/main/loss` -> val_loss, `DEV_F1` -> val_acc."""
    k = name.lower()
    if k in STEP_KEYS:
        return "step"
    if k in EPOCH_KEYS:
        return "epoch"
    if (c := canonical(k)) is not None:
        return c
    words = [w for w in _WORDS.split(k) if w]
    if len(words) >= 2 and "_".join(words[-2:]) in _BASE:
        words = [*words[:-2], "_".join(words[-2:])]
    base = _BASE.get(words[-1]) if words else None
    if base == "loss" and len(words) == 2 and words[0] not in _VAL and words[0] not in _QUALIFIERS:
        return PART_LOSS  # `box_loss`, `cls_loss`: one term of the objective (Ultralytics, YOLOv5)
    if base is None or not all(w in _VAL or w in _QUALIFIERS for w in words[:-1]):
        return None  # `per_class_accuracy`, `bad_epochs`: a column of another meaning
    if any(w in _VAL for w in words):
        return {"loss": "val_loss", "acc": "val_acc"}.get(base)
    return base


def header(line: str) -> Header | None:
    """The line as a metric table's header, or None: three or more column names, at least half of them known, one a
    loss or an accuracy."""
    text = line.strip()
    if not text or len(text) > 2000 or not ("a" <= text[0] <= "z" or "A" <= text[0] <= "Z"):
        return None  # the first name starts the text, and a name starts with a letter (_NAME): `[rank0]: ...`, `{'loss'...`
    sep = "\t" if "\t" in text else "," if "," in text else None
    names = _split(text, sep)
    if not 3 <= len(names) <= MAX_COLUMNS or not all(_NAME.match(n) for n in names):
        return None
    keys = tuple(column(n) for n in names)
    if not any(k in ("loss", "val_loss", "acc", "val_acc", PART_LOSS) for k in keys) or 2 * sum(k is not None for k in keys) < len(keys):
        return None  # no loss or accuracy column, or mostly words we cannot read: a sentence, not a header
    return Header(sep=sep, keys=keys)


def row(head: Header, line: str) -> tuple[dict[str, float], float | None, float | None] | None:
    """(values, step, epoch) of one row under `head`, or None when the line is not a row of that table.

    A row may end in its progress bar (Ultralytics' `  1/1000  17.2G  1.23  nan  0.9  55  640: 100%|###| 4/4 [...]`):
    the bar is cut off, and `1/1000` in the epoch column is epoch 1 of 1000."""
    if (bar := _BAR.search(line)) is not None:
        line = line[: bar.start()].rstrip()
        line = line.removesuffix(":")
    cells = _split(line, head.sep)
    if len(cells) != len(head.keys):
        return None
    values: dict[str, float] = {}
    parts: list[float] = []
    step = epoch = None
    for key, cell in zip(head.keys, cells, strict=True):
        if key is None:
            continue
        if key == "epoch" and (of := _OF.match(cell)) is not None:
            cell = of["n"]
        elif key == "mem" and cell[-1:] in _MEM_UNITS:
            cell = str(float(cell[:-1]) * _MEM_UNITS[cell[-1]]) if _NUMBER.match(cell[:-1]) else cell  # `17.2G`: in MB
        try:
            v = float(cell)
        except ValueError:
            return None  # a column we read that holds no number: not a row (a repeated header, prose)
        if key == "step":
            step = v
        elif key == "epoch":
            epoch = v
        elif key == PART_LOSS:
            parts.append(v)
        else:
            values[key] = v
    if parts and "loss" not in values:
        values["loss"] = sum(parts)  # a nan term makes the sum nan, as it makes the objective
    return (values, step, epoch) if values else None
