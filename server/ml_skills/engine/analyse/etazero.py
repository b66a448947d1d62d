"""A run over by its own clock: the whole run's time left reaching zero, or falling below one logging
interval at the log's end with the final save or evaluation after it."""

from __future__ import annotations

import re

from ml_skills.engine.analyse.quietend import advice
from ml_skills.lazyre import lazy

# the whole run's estimated time left, as detectron2, mmcv/mmengine and YOLOX print it on every iteration line: zero on the
# last iteration of the run (not of an epoch: a tqdm bar's '<00:00' is the epoch's); a JSON log's key is quoted and so is
# its value ('"eta": "00:00:00"' beside '"progress_pct": 100.0')
_ETA_ZERO = lazy(r"""(?i)\beta["']?:\s*["']?(?:0?0:00:00|0?0:00|0s)(?:["']|\s|,|$)""")
_ETA = lazy(r"""(?i)\beta["']?:\s*+["']?(?:(?P<d>\d{1,4}) days?,\s*+)?(?P<h>\d{1,6}):(?P<m>\d\d):(?P<s>\d\d)\b""")
_FATAL = lazy(r"(?i)(error|exception|traceback|killed|fatal|abort)")
_AFTER_LAST_ETA = 40
# what such runners print once training's last interval is over: the final checkpoint, the final evaluation
_WRAP_UP = lazy(r"(?i)\b(?:sav(?:e|ed|ing)\s++checkpoint|checkpoint\s++saved|evaluat\w*+|Epoch\(val\)|Average (?:Precision|Recall))\b")


def _eta_seconds(m: re.Match[str]) -> int:
    return ((int(m["d"] or 0) * 24 + int(m["h"])) * 60 + int(m["m"])) * 60 + int(m["s"])


def eta_reached_zero(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The last progress line when it says no time is left for the whole run, and nothing fatal follows it (the
    final save and evaluation that such runners print next may report NaN for metrics they cannot compute); or the
    last line giving the whole run's time left, when that time is less than it fell by since the line before (the run
    was in its last logging interval: mmdet's 'eta: 0:00:16' at iteration 250 of 271 after 'eta: 0:00:54' at 200), and
    a few lines follow it, among them the final save or evaluation, none fatal (an experiment's name alone is no end)."""
    if (last_progress_line is not None and 0 <= (i := last_progress_line - tail_start) < len(tail)
            and _ETA_ZERO.search(tail[i]) and not any(_FATAL.search(x) and not advice(x) for x in tail[i + 1 :])):
        return last_progress_line
    etas = [(k, m) for k, x in enumerate(tail) if "eta" in x.lower() and (m := _ETA.search(x))]
    if len(etas) < 2:
        return None
    (_, before), (k, last) = etas[-2], etas[-1]
    after = [x for x in tail[k + 1 :] if x.strip()]
    if len(after) > _AFTER_LAST_ETA or not any(_WRAP_UP.search(x) for x in after) or any(_FATAL.search(x) and not advice(x) for x in after):
        return None
    left, fell = _eta_seconds(last), _eta_seconds(before) - _eta_seconds(last)
    return tail_start + k if 0 < fell and left < fell else None
