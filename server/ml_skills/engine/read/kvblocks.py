"""Key-value blocks: one metric per line between rules of dashes, the whole block one logging step.

OpenAI baselines' logger prints its records this way, and so do the projects built on it (Stable-Baselines3,
imitation, improved- and guided-diffusion):

    -----------------------------
    | loss          | nan       |
    | step          | 1.53e+05  |
    -----------------------------

Stable-Baselines3 groups keys under section rows (`| train/ |  |` then `|    loss | -0.0453 |` is train/loss). A
line-at-a-time reader sees a key and a number with no step; the block gives each value its step.
"""

from __future__ import annotations

from ml_skills.engine.read import tables
from ml_skills.lazyre import lazy

# possessive: a cell is everything up to the next bar, taken once (a lazy cell with optional spaces around it took
# quadratic time on a long line of spaces); the cells are stripped after the match
_ROW = lazy(rb"^[ \t]*+\|([^|\n]*+)\|([^|\n]*+)\|[ \t\r]*+$")
MAX_BLOCK_LINES = 256  # a record of more keys than any logger prints is not one
# the step of a reinforcement-learning record: environment steps (SB3's time/total_timesteps, baselines' 'timesteps')
_STEP_KEYS = frozenset({"total_timesteps", "time/total_timesteps", "timesteps", "misc/total_timesteps", "samples_step"})


def is_row(line: bytes | bytearray) -> bool:
    return _ROW.match(line) is not None


def record(lines: list[bytes]) -> tuple[tuple[dict[str, float], float | None, float | None], int] | None:
    """((canonical values, step, epoch), the index of the row holding the loss or else the first metric) of one
    block's rows, or None when it holds no metric we read."""
    values: dict[str, float] = {}
    anchor = None
    step = epoch = None
    section = ""
    for i, raw in enumerate(lines):
        m = _ROW.match(raw)
        if m is None:
            continue
        key, cell = (g.decode("utf-8", errors="replace").strip() for g in m.groups())
        if key.endswith("/") and not cell:
            section = key  # SB3's section row: the keys below it belong to it
            continue
        name = key if "/" in key else section + key
        try:
            v = float(cell)
        except ValueError:
            continue
        if name.lower() in _STEP_KEYS:
            step = v
            continue
        col = tables.column(name)
        if col == "step":
            step = v if step is None else step
        elif col == "epoch":
            epoch = v
        elif col is not None and col not in values:
            values[col] = v
            if anchor is None or col == "loss":
                anchor = i
    return ((values, step, epoch), anchor) if values and anchor is not None else None
