"""Turn one log line into metric values: parse_line and parse_timestamp, what the scan and the analysers call.

Every format of metric_formats.FORMATS reads the line in turn; metric_keys says what its keys name (over the
vocabulary of models.canonical, which a tracker collector folds its keys into too) and metric_shapes keeps what
the patterns found per line shape.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ml_skills.engine.read.metric_formats import FORMATS, lone_loss_part
from ml_skills.engine.read.metric_keys import eval_labelled
from ml_skills.engine.read.metric_shapes import Found
from ml_skills.lazyre import lazy

_TIMESTAMP = lazy(
    r"(?P<y>20\d\d)[-/](?P<mo>\d\d)[-/](?P<d>\d\d)[ T_](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d{1,6}))?"
)
# a line without any of these words (lower-cased) holds no metric; `in` on the lower-cased line beats a (?i) regex
_HINTS = ("loss", "acc", "lr", "learning", "grad", "norm", "step", "iter", "epoch", "it/s", "samples", "tokens", "mem",
          "perplexity", "ppl", "auc", "mse", "mae", "mape", "'s l", "-l1", "-l2", "huber", "error:")


def parse_timestamp(line: str) -> datetime | None:
    m = _TIMESTAMP.search(line)
    if not m:
        return None
    try:
        micro = int((m["f"] or "0").ljust(6, "0"))  # logging's ",123" and ISO ".123456": order within a second
        return datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]), micro)
    except ValueError:
        return None


def _metric_text(line: str) -> str | None:
    """The part of a raw line worth parsing: the last frame of a carriage-return bar; None when the line cannot
    hold a metric (too long, an argparse dump or usage text, none of the metric words)."""
    if "\r" in line:
        frames = [f for f in line.split("\r") if f.strip()]
        if not frames:
            return None
        line = frames[-1]
    if len(line) > 4000 or "Namespace(" in line or "usage:" in line:
        return None
    return line


def parse_line(line: str, memo: dict[str, Any] | None = None) -> tuple[dict[str, float], float | None, float | None] | None:
    """Return (canonical values, step, epoch) for a metric line, or None if it holds no metric.

    Every format of FORMATS reads the line in turn (the first value of a name wins); a format that owns the whole
    line (a JSON object) ends the reading. `memo`: shape_memo of the raw line `line` was decoded from (UTF-8, its
    errors replaced: a digit is never part of a multi-byte character, so two raw lines of one shape decode to two
    texts of one shape), or None."""
    text = _metric_text(line)
    if text is None:
        return None
    low = text.lower()
    hinted: bool | None
    if memo is None:
        hinted = any(h in low for h in _HINTS)
    elif (hinted := memo.get("hinted")) is None:  # the hints name no digit
        hinted = memo["hinted"] = any(h in low for h in _HINTS)
    if not hinted:
        return None
    found = Found(memo)
    for _name, read in FORMATS if memo is None else memo.get("formats", FORMATS):
        if read(text, low, found):
            break
    if memo is not None and "formats" not in memo:
        # each format reads a line through its own memo site, named as it is, before anything else: a format whose
        # site found nothing on this shape reads nothing on any line of it (a site not reached is kept)
        memo["formats"] = [(name, read) for name, read in FORMATS if memo.get(name, True)]
    if ("loss" not in found.values and "loss" in low and (found.values or found.step is not None or found.epoch is not None)
            and (part := lone_loss_part(text)) is not None):
        found.values["loss"] = part
    if not found.values:
        return None
    _fold_eval_split(low, found)
    return found.values, found.step, found.epoch


def _fold_eval_split(low: str, found: Found) -> None:
    values = found.values
    if "loss" not in values and "acc" not in values:
        return  # nothing to fold (a bar's throughput, an lr line): no search on every such line
    if not found.spans("eval-label", eval_labelled, low):
        return
    for train, held in (("loss", "val_loss"), ("acc", "val_acc")):
        if train in values and held not in values:
            values[held] = values.pop(train)
