"""The metric parser's shape memo (metric_shapes.shape_of, shape_memo): what a digit-blind pattern found on one line of a shape
is read at the same offsets of every other line of that shape.

Two things make that exact, and each is checked here: every pattern read through the memo is digit-blind (it names no
digit, no character class holds some ASCII digits and not others, no backreference), so two texts that differ only in
which ASCII digits they hold are matched at the same places; and on every line of every real log and of the benchmark
log, the parse, the epoch/iteration counters and the rank read through a memo filled by another line of the same shape
(the line with its digits changed at random) are the ones read from the line itself.
"""

from __future__ import annotations

import random
import re
import re._constants as sc  # type: ignore[import-not-found]
import re._parser as sp  # type: ignore[import-not-found]
from pathlib import Path
from typing import Any

import pytest
from ml_skills.engine.read import counters, metric_formats, metric_keys, metric_lines, metric_shapes, metrics

from bench.genlog import generate
from tests import real_logs

ROOT = Path(__file__).parents[1]
_DIGITS = "0123456789"

# every pattern a memo site searches with (metric_shapes.Found.spans, epoch_iteration, metric_lines.rank_of)
BLIND = {
    "pair": metric_formats._PAIR, "tqdm": metric_formats._TQDM, "count-accuracy": metric_formats._COUNT_ACC,
    "segment": metric_formats._SEGMENT, "loss-word": metric_formats._WORD_NUM, "named-number": metric_formats._NAMED_NUM,
    "step-word": metric_formats._SPACE_PAIR, "megatron": metric_formats._MEGATRON_ITER, "lr-to": metric_formats._LR_TO,
    "first-metric": metric_keys._FIRST_METRIC, "eval-label": metric_keys._EVAL_LABEL, "train-label": metric_keys._TRAIN_LABEL,
    "epoch-iteration": counters._EPOCH_ITER, "epoch-iteration-lower": counters._EPOCH_ITER_LOWER, "rank": metric_lines._RANK,
}


def _in_class(items: list[Any], ch: str) -> bool:
    """Whether a character class's items (an IN node of the parsed pattern) take `ch` (flags aside: digits fold to none)."""
    code, hit = ord(ch), False
    for op, av in items:
        if op is sc.NEGATE:
            continue
        if op is sc.LITERAL and av == code or op is sc.RANGE and av[0] <= code <= av[1]:
            hit = True
        elif op is sc.CATEGORY:
            hit = hit or bool(re.fullmatch({sc.CATEGORY_DIGIT: r"\d", sc.CATEGORY_NOT_DIGIT: r"\D", sc.CATEGORY_WORD: r"\w",
                                            sc.CATEGORY_NOT_WORD: r"\W", sc.CATEGORY_SPACE: r"\s",
                                            sc.CATEGORY_NOT_SPACE: r"\S"}[av], ch))
    negated = any(op is sc.NEGATE for op, _ in items)
    return hit != negated


def _blind_problems(node: Any, where: str) -> list[str]:
    """What in a parsed pattern tells one ASCII digit from another."""
    out: list[str] = []
    for op, av in node:
        if op in (sc.LITERAL, sc.NOT_LITERAL) and chr(av) in _DIGITS:
            out.append(f"{where}: names the digit {chr(av)!r}")
        elif op is sc.IN:
            taken = {_in_class(av, d) for d in _DIGITS}
            if len(taken) > 1:
                out.append(f"{where}: a class holds some digits and not others")
        elif op in (sc.GROUPREF, sc.GROUPREF_EXISTS):
            out.append(f"{where}: a backreference")
        if op is sc.GROUPREF_EXISTS:
            continue
        for sub in (av if isinstance(av, (tuple, list)) else ()):
            if isinstance(sub, sp.SubPattern):
                out += _blind_problems(sub, where)
            elif isinstance(sub, (tuple, list)):
                out += [p for s in sub if isinstance(s, sp.SubPattern) for p in _blind_problems(s, where)]
    return out


@pytest.mark.parametrize("name", sorted(BLIND))
def test_every_memo_pattern_is_digit_blind(name: str) -> None:
    rx = BLIND[name]
    assert _blind_problems(sp.parse(rx.pattern, rx.flags), name) == []


def test_the_check_sees_digits() -> None:
    for bad in (r"loss scale: 1\.0\b", r"[1-9]\d*", r"(\d)\1", r"[a0]"):
        assert _blind_problems(sp.parse(bad), bad), bad
    for good in (r"\d+", r"[\d:]+", r"[^|]*", r"[A-Za-z_]\w*", r"[0-9]"):
        assert not _blind_problems(sp.parse(good), good), good


def _twin(raw: bytes, rng: random.Random) -> bytes:
    """The line with every ASCII digit changed at random: another line of its shape."""
    return bytes(rng.choice(b"0123456789") if 48 <= b <= 57 else b for b in raw)


def _read(raw: bytes, memo: dict[str, Any] | None) -> str:
    text = raw.decode("utf-8", errors="replace")
    return repr((metrics.parse_line(text, memo), counters.epoch_iteration(text, memo), metric_lines.rank_of(text, memo)))


def _check_lines(raws: list[bytes], seed: int) -> int:
    rng = random.Random(seed)
    checked = 0
    for raw in raws:
        shape = metric_shapes.shape_of(raw)
        if shape is None:
            continue
        twin = _twin(raw, rng)
        assert metric_shapes.shape_of(twin) == shape
        memo: dict[str, Any] = {}
        want_twin = _read(twin, None)
        assert _read(twin, memo) == want_twin  # the twin fills the memo
        assert _read(raw, memo) == _read(raw, None), raw[:300]  # the line reads it
        assert _read(twin, memo) == want_twin
        checked += 1
    return checked


def test_every_line_of_the_benchmark_log_reads_the_same_through_a_memo(tmp_path: Path) -> None:
    generate(tmp_path / "bench.log", 2**20, seed=11)
    raws = (tmp_path / "bench.log").read_bytes().split(b"\n")
    assert _check_lines(raws, 11) > 5000


@pytest.mark.slow
def test_every_line_of_every_real_log_reads_the_same_through_a_memo() -> None:
    logs = real_logs.sample(real_logs.logs("corpus/*/train.log", "healthy/*/train.log", "real-logs/*/*.log"), 3)
    assert len(logs) > 800
    checked = sum(_check_lines(log.read_bytes().split(b"\n"), i) for i, log in enumerate(logs))
    assert checked > 30_000


def test_a_memo_is_kept_per_shape_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metric_shapes, "_shapes", {})
    monkeypatch.setattr(metric_shapes, "SHAPES_KEPT", 3)
    a = metric_shapes.shape_memo(metric_shapes.shape_of(b"step=12 loss=0.5"))
    assert a is metric_shapes.shape_memo(metric_shapes.shape_of(b"step=99 loss=7.1"))  # one shape
    assert a is not metric_shapes.shape_memo(metric_shapes.shape_of(b"step=99 loss=7.10"))
    for i in range(5):
        metric_shapes.shape_memo(metric_shapes.shape_of(b"x" * i))
    assert len(metric_shapes._shapes) <= 3
    assert metric_shapes.shape_of(b"1" * (metric_shapes.SHAPE_BYTES + 1)) is None and metric_shapes.shape_memo(None) is None
