"""metric_formats._key_values works out what each `key=value` key names once per distinct key (metric_keys.pair_key):
the same values, step and epoch as working it out on every match (the implementation before, kept here as the
reference), on every line of every real log, on lines of the benchmark log and on keys made to reach each branch."""

from __future__ import annotations

import math
from pathlib import Path

from ml_skills.engine.read import metric_formats, metric_keys
from ml_skills.engine.read.metric_shapes import Found
from ml_skills.models import EPOCH_KEYS, STEP_KEYS, canonical

from bench.genlog import generate


def reference(line: str, found: Found) -> None:
    values = found.values
    for m in metric_formats._PAIR.finditer(line):
        key = m["key"].lower().strip()
        try:
            val = metric_formats._num(m["val"])  # the value as the formats read it (a zero-padded NaN too)
        except ValueError:
            continue
        if key in STEP_KEYS or key.replace(" ", "_") in STEP_KEYS:
            if found.step is None and not math.isnan(val):
                found.step = val
            continue
        if key in EPOCH_KEYS:
            found.epoch = val
            continue
        c = canonical(key)
        if c is None and " " in key:
            c = metric_keys.phrase(key)
        if c is None and not math.isfinite(val) and metric_keys.named_loss(key):
            c = "loss"  # a named loss term at nan (the rule of tests/engine/test_named_losses_nan.py)
        if c is not None:
            if c == "step_time" and "(ms)" in key:
                val /= 1000.0
            values.setdefault(c, val)


MADE = ["global step: 10, Step: 11 loss=nan", "step=nan step=3 epoch: 1 epoch=2", "iteration time (ms): 812.5 | lm loss: 7.1E+00",
        "Train Loss: 0.41, Validation Loss: 0.52, val acc: 0.9", "Loss = 1, LOSS = 2, train/loss=3", "elapsed time per iteration (ms): 2.5",
        "elapsed_time_per_iteration (ms): 812.5 | loss: 2"]


def test_the_key_memo_reads_every_line_as_before(tmp_path: Path) -> None:
    root = Path(__file__).parents[1]
    lines = list(MADE)
    for log in sorted(root.glob("corpus/*/train.log")) + sorted(root.glob("healthy/*/train.log")):
        lines += log.read_text("utf-8", errors="replace").splitlines()
    generate(tmp_path / "bench.log", 2**20, seed=5)
    lines += (tmp_path / "bench.log").read_text("utf-8", errors="replace").splitlines()
    read = 0
    for line in lines:
        got, want = Found(), Found()
        metric_formats._key_values(line, line.lower(), got)
        reference(line, want)
        assert repr((got.values, got.step, got.epoch)) == repr((want.values, want.step, want.epoch)), line
        read += bool(got.values)
    assert read > 1000


def reference_step_words(line: str, low: str, found: Found) -> None:
    wanted = "step" in low or "iter" in low or "epoch" in low or "ep " in low
    for m in metric_formats._SPACE_PAIR.finditer(line) if wanted else ():
        k = m["key"].lower()
        v = float(m["val"])
        if k in ("epoch", "ep") and found.epoch is None:
            found.epoch = v
        elif k != "epoch" and found.step is None:
            found.step = v


def test_the_step_words_skip_only_lines_where_no_counter_can_change(tmp_path: Path) -> None:
    """_step_words searches a line only when a counter it could set is still missing and the line holds its word: from
    the state the formats before it leave, the same step and epoch as searching every line that holds one."""
    root = Path(__file__).parents[1]
    lines = [*MADE, "Epoch 3 step 7", "step=5 Epoch 2", "epoch=1 iter 9", "Iteration 4: epoch [2/10]"]
    for log in sorted(root.glob("corpus/*/train.log")) + sorted(root.glob("healthy/*/train.log")):
        lines += log.read_text("utf-8", errors="replace").splitlines()
    generate(tmp_path / "bench.log", 2**20, seed=8)
    lines += (tmp_path / "bench.log").read_text("utf-8", errors="replace").splitlines()
    before = [fn for name, fn in metric_formats.FORMATS[: [n for n, _ in metric_formats.FORMATS].index("step-word")]]
    changed = 0
    for line in lines:
        low, got = line.lower(), Found()
        for fn in before:
            if fn(line, low, got):
                break
        want = Found()
        want.values, want.step, want.epoch = dict(got.values), got.step, got.epoch
        metric_formats._step_words(line, low, got)
        reference_step_words(line, low, want)
        assert repr((got.step, got.epoch)) == repr((want.step, want.epoch)), line
        changed += (got.step, got.epoch) != (None, None)
    assert changed > 1000
