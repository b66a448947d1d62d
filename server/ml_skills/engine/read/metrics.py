"""Turn one log line into metric values, from the formats people really have.

HF Trainer dicts (`{'loss': 2.3, 'grad_norm': 1.1, 'epoch': 0.5}`), JSON lines, `key=value`
and `key: value` (also with spaces in keys, as Megatron writes `lm loss: 7.1E+00`), tqdm and
Lightning bars (`Epoch 0:  45%|...| 450/1000 [..., loss=0.51]`, carriage-return frames), Keras
(`- loss: 0.23 - val_loss: 0.35`), DeepSpeed (`step=100, skipped=0, lr=[0.0001]`) and nanoGPT
(`iter 100: loss 2.3, time 20ms`). Keys are folded into canonical names (models.ALIASES, the
vocabulary a tracker collector folds its keys into too) so every detector reads one vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from typing import Any

from ml_skills.lazyre import lazy
from ml_skills.models import ALIASES, CANONICAL, EPOCH_KEYS, STEP_KEYS, canonical  # noqa: F401 (the vocabulary, re-exported)
from ml_skills.safety import untrusted_json

_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|NaN|NAN|-?Infinity|inf|Inf|INF|-inf|-Inf)"
_PAIR = lazy(
    r"(?:^|[\s|,;{(\[-])['\"]?(?P<key>[A-Za-z_][\w/.\-]*(?: [A-Za-z_][\w/]*){0,2}(?: \([a-z]+\))?)['\"]?\s*(?:(?:::?|=)\s*)\[?(?:tensor\()?(?P<val>" + _NUM + r")(?=[\s,|;}\])%a-zA-Z]|:\s|:$|$)"
)
_SEGMENT = lazy(r"^\s*(?P<key>[A-Za-z_][\w/.\-]*(?: [a-z_][\w/]*){0,2})\s+(?P<val>" + _NUM + r")\s*[a-zA-Z%]{0,3}\s*$")
# `epoch 3`, `Epoch 3/10`, the tutorials' `Epoch [3/10]` / `Epoch: [3/10]`, and hand-written loops' `Ep 20 | Loss 0.1`
_SPACE_PAIR = lazy(r"\b(?P<key>step|iter|iteration|epoch|Epoch|Ep|Step|Iter|Iteration|EPOCH|STEP|ITER|ITERATION)(?:\s+|\s*:?\s*\[\s*)(?P<val>\d+(?:\.\d+)?)(?:\s*/\s*(?P<total>\d+))?\b")
# `loss 2.31`, `train loss is 0.4`: matched on the lower-cased line, from the literal (the word before is checked after)
_WORD_NUM = lazy(r"loss\s+(?:is\s+)?(?P<val>" + _NUM.lower() + r")(?!\w|\.\d)")
_WORD_BEFORE = {"train ": "loss", "val ": "val_loss", "valid ": "val_loss", "eval ": "val_loss", "test ": "val_loss"}
_NAMED_NUM = lazy(r"(?:^|[\s|,;(\[])(?P<key>[A-Za-z][\w/.]*(?:@\d)?)\s+(?P<val>" + _NUM + r")(?=[\s,|;)\]]|$)")
_TQDM = lazy(r"(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*\[(?P<elapsed>[\d:]+)<(?P<eta>[\d:?]+),\s*(?P<rate>\d+(?:\.\d+)?)\s*(?P<unit>[a-zA-Z/]+)(?P<rest>[^\]]*)\]")
_TIMESTAMP = lazy(
    r"(?P<y>20\d\d)[-/](?P<mo>\d\d)[-/](?P<d>\d\d)[ T_](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d{1,6}))?"
)
# Megatron's iteration line prints a loss only when its average is > 0, so a NaN loss silently disappears from it
# (training_log: `if avg > 0.0`); with nothing skipped (loss scale 1.0, or 0 skipped iterations) no loss field means NaN
_MEGATRON_ITER = lazy(r"^\s*iteration\s+\d+\s*/\s*\d+\s*\|")
_MEGATRON_NOTHING_SKIPPED = lazy(r"\|\s*loss scale: 1\.0\b|number of skipped iterations:\s*0\b")
_ANY_LOSS = lazy(r"(?i)loss(?! scale)")
# a line without any of these words (lower-cased) holds no metric; `in` on the lower-cased line beats a (?i) regex
_HINTS = ("loss", "acc", "lr", "learning", "grad", "norm", "step", "iter", "epoch", "it/s", "samples", "tokens", "mem",
          "perplexity", "ppl")


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _num(text: str) -> float:
    return float(text)


def parse_timestamp(line: str) -> datetime | None:
    m = _TIMESTAMP.search(line)
    if not m:
        return None
    try:
        micro = int((m["f"] or "0").ljust(6, "0"))  # logging's ",123" and ISO ".123456": order within a second
        return datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]), micro)
    except ValueError:
        return None


_VAL_WORDS = {"val", "valid", "validation", "eval", "evaluation", "test", "dev"}
_RECORD_WORDS = frozenset({"best", "min", "max", "lowest", "highest", "previous", "prev", "old"})


@lru_cache(maxsize=1024)
def _phrase(key: str) -> str | None:
    """A key of several words: 'Train Loss', 'Smoothed Validation Loss', 'lm loss', 'val acc'.

    Hand-written loops print capitalised phrases ('Epoch [3/100], Train Loss: 0.41, Validation
    Loss: 0.52'); a phrase ending in loss or accuracy counts as the validation series when any of
    its words says so, otherwise as the training one.
    """
    words = key.lower().split(" ")
    if words[0] in _RECORD_WORDS:
        return None  # 'Best Loss: 0.577': the best value so far, printed beside the current one, is not a reading
    last = canonical(words[-1])
    if words[0] in ("lm", "total", "train", "training") and last is not None:
        return last
    if last not in ("loss", "acc"):
        return None
    if any(w in _VAL_WORDS for w in words[:-1]):
        return {"loss": "val_loss", "acc": "val_acc"}[last]
    return last


class Found:
    """What the formats read on one line so far. The first value of a canonical name wins, so an earlier format
    takes precedence over a later one; step and epoch follow each format's own rule (see its parser).

    `memo` is what the digit-blind patterns found on the first line of this line's shape (see `shape_of`), by site,
    or None to search this line itself."""

    __slots__ = ("epoch", "memo", "step", "values")

    def __init__(self, memo: dict[str, Any] | None = None) -> None:
        self.values: dict[str, float] = {}
        self.step: float | None = None
        self.epoch: float | None = None
        self.memo = memo

    def spans(self, site: str, find: Callable[[str], Any], text: str) -> Any:
        """find(text): the spans a digit-blind pattern finds in `text`, from the memo of this line's shape when
        another line of the shape was searched already."""
        memo = self.memo
        if memo is None:
            return find(text)
        found = memo.get(site, _MISSING)
        if found is _MISSING:
            found = memo[site] = find(text)
        return found


# A format's parser reads `line` (and `low`, the line lower-cased) into `found`; it returns True when the line is
# that format's alone and no later format may read it (a JSON object), False to let the next one read on.
Format = Callable[[str, str, Found], bool]
FORMATS: list[tuple[str, Format]] = []  # tried in this order: registration order is precedence


def _format(name: str) -> Callable[[Format], Format]:
    """Register a parser as the next format parse_line tries."""
    def register(fn: Format) -> Format:
        FORMATS.append((name, fn))
        return fn
    return register


def _json_shaped(stripped: str) -> bool:
    brace = stripped.find("{")
    return brace >= 0 and stripped.endswith("}") and '"' in stripped[brace:]


@_format("json")
def _json_object(line: str, low: str, found: Found) -> bool:
    """`{"loss": 2.3, "step": 10}` and HF Trainer dicts after a prefix: the whole line is this object."""
    stripped = line.strip()
    brace = stripped.find("{")
    if not found.spans("json", _json_shaped, stripped):
        return False
    try:
        obj = untrusted_json.loads(stripped[brace:])
    except ValueError:  # also nesting too deep: `{"loss": [[[...]]]}`
        return False
    if not isinstance(obj, dict):
        return False
    for k, v in obj.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            continue
        try:
            fv = float(v)
        except (ValueError, OverflowError):  # OverflowError: an integer of 400 digits
            continue
        kl = str(k).lower()
        if kl in STEP_KEYS:
            found.step = fv
        elif kl in EPOCH_KEYS:
            found.epoch = fv
        elif (c := canonical(kl)) is not None:
            found.values.setdefault(c, fv)
    return True


def _tqdm_spans(line: str) -> tuple[tuple[int, int], ...] | None:
    bar = _TQDM.search(line)
    return None if bar is None else (bar.span("n"), bar.span("rate"), bar.span("unit"))


@_format("tqdm")
def _tqdm_bar(line: str, low: str, found: Found) -> bool:
    """A tqdm or Lightning bar: its count is the step, its rate the throughput."""
    bar = found.spans("tqdm", _tqdm_spans, line) if "%|" in line else None  # the bar's own literal: skip the slow search on other lines
    if bar:
        (ns, ne), (rs, re_), (us, ue) = bar
        found.step = float(line[ns:ne])
        unit = line[us:ue]
        rate = float(line[rs:re_])
        if unit in ("it/s", "samples/s", "tok/s", "img/s"):
            found.values["throughput"] = rate
        elif unit == "s/it" and rate > 0:
            found.values["throughput"] = 1.0 / rate
    return False


def _named_loss(key: str) -> bool:
    """A training loss by another name: a key ending in 'loss' (one part of a composite objective, a GAN's g_loss),
    not an evaluation's."""
    k = key.replace(" ", "_")
    return k.endswith("loss") and not k.startswith(("val", "eval", "test", "dev", "valid"))


_OTHER, _STEP, _EPOCH, _METRIC = range(4)  # what a key of `key=value` names


@lru_cache(maxsize=4096)  # a log repeats a few dozen keys on every line
def _pair_key(raw: str) -> tuple[int, str | None, bool]:
    """What a `key=value` key names (_STEP, _EPOCH, _METRIC and its canonical name, or _OTHER), and whether its value
    is in ms: worked out once per distinct key, not once per line."""
    key = raw.lower().strip()
    if key in STEP_KEYS or key.replace(" ", "_") in STEP_KEYS:
        return _STEP, None, False
    if key in EPOCH_KEYS:
        return _EPOCH, None, False
    c = canonical(key)
    if c is None and " " in key:
        c = _phrase(key)
    return (_OTHER, None, False) if c is None else (_METRIC, c, c == "step_time" and "(ms)" in key)


def _pair_spans(line: str) -> tuple[tuple[int, int, int, int], ...]:
    return tuple((*m.span("key"), *m.span("val")) for m in _PAIR.finditer(line))


@_format("key-value")
def _key_values(line: str, low: str, found: Found) -> bool:
    """`key=value`, `key: value`, Keras' `- loss: 0.23`, keys of a few words (`lm loss: 7.1E+00`)."""
    values = found.values
    for ks, ke, vs, ve in found.spans("key-value", _pair_spans, line):
        kind, name, in_ms = _pair_key(line[ks:ke])
        try:
            val = _num(line[vs:ve])
        except ValueError:
            continue
        if kind == _STEP:
            if found.step is None and not math.isnan(val):
                found.step = val
        elif kind == _EPOCH:
            found.epoch = val
        elif name is not None:
            values.setdefault(name, val / 1000.0 if in_ms else val)
        elif not math.isfinite(val) and _named_loss(line[ks:ke].lower().strip()):
            values.setdefault("loss", val)  # one of several losses ('NoConvLoss=nan', 'g_loss: nan'): the objective is not finite
    return False


# an accuracy printed as a count and its percentage: the MNIST example's 'Accuracy: 9837/10000 (98%)'
_COUNT_ACC = lazy(r"(?i)\baccuracy\s*[:=]\s*\d+\s*/\s*\d+\s*\(\s*(?P<pct>\d+(?:\.\d+)?)\s*%\s*\)")


def _count_acc_span(line: str) -> tuple[int, int] | None:
    m = _COUNT_ACC.search(line)
    return None if m is None else m.span("pct")


@_format("count-accuracy")
def _count_accuracy(line: str, low: str, found: Found) -> bool:
    """`Accuracy: 49816/50000 (99.63%)`: the percentage, as a percent like any `acc: 99.6%`."""
    if "%" in line and (pct := found.spans("count-accuracy", _count_acc_span, line)) is not None:
        found.values.setdefault("acc", float(line[pct[0]:pct[1]]))
    return False


def _segment_spans(line: str) -> tuple[tuple[int, int, int, int], ...]:
    """(key start, end, value start, end) in `line` of each `|`-separated segment that reads `key value`."""
    out = []
    at = 0
    for seg in line.split("|"):
        if (sm := _SEGMENT.match(seg)) is not None:
            out.append((at + sm.start("key"), at + sm.end("key"), at + sm.start("val"), at + sm.end("val")))
        at += len(seg) + 1
    return tuple(out)


@_format("pipe-segments")
def _pipe_segments(line: str, low: str, found: Found) -> bool:
    """fairseq and many custom loggers: `step 100 | loss 2.31 | lr 0.0005`."""
    if "|" not in line:
        return False
    for ks, ke, vs, ve in found.spans("pipe-segments", _segment_spans, line):
        key = line[ks:ke].lower()
        if key in STEP_KEYS:
            found.step = found.step if found.step is not None else float(line[vs:ve])
        elif key in EPOCH_KEYS:
            found.epoch = found.epoch if found.epoch is not None else float(line[vs:ve])
        elif (c := canonical(key)) is not None:
            found.values.setdefault(c, _num(line[vs:ve]))
    return False


def _loss_word_spans(low: str) -> tuple[tuple[int, int, int], ...]:
    return tuple((m.start(), *m.span("val")) for m in _WORD_NUM.finditer(low))


@_format("loss-word")
def _loss_words(line: str, low: str, found: Found) -> bool:
    """nanoGPT's `iter 100: loss 2.3`, `train loss is 0.4`: the word before `loss` names the series."""
    for s, vs, ve in found.spans("loss-word", _loss_word_spans, low):
        if s and _is_word(low[s - 1]):
            continue  # not a word of its own (`val_loss 0.3` is _NAMED_NUM's)
        c = next((c for w, c in _WORD_BEFORE.items() if low.endswith(w, 0, s) and (s == len(w) or not _is_word(low[s - len(w) - 1]))), "loss")
        found.values.setdefault(c, _num(low[vs:ve]))
    return False


def _named_spans(line: str) -> tuple[tuple[int, int, int, int], ...]:
    return tuple((*m.span("key"), *m.span("val")) for m in _NAMED_NUM.finditer(line))


@_format("named-number")
def _named_numbers(line: str, low: str, found: Found) -> bool:
    """print(f"epoch {e} train_loss {x:.4f} val_loss {y:.4f}"): known names only."""
    for ks, ke, vs, ve in found.spans("named-number", _named_spans, line):
        if (c := canonical(line[ks:ke])) is not None:
            found.values.setdefault(c, _num(line[vs:ve]))
    return False


def _space_pair_spans(line: str) -> tuple[tuple[int, int, int, int], ...]:
    return tuple((*m.span("key"), *m.span("val")) for m in _SPACE_PAIR.finditer(line))


@_format("step-word")
def _step_words(line: str, low: str, found: Found) -> bool:
    """`epoch 3`, `Epoch 3/10`, `Epoch [3/10]`, `step 100`: the counters, where no earlier format gave them.

    Only a counter still missing can be set, and only by a key the line holds (its keys, lower-cased, hold 'epoch',
    'step' or 'iter'): a `step=100` line with no epoch word is not searched (4 us a line, every loss line of a small
    log)."""
    # 'ep ' outside 'step ': every step line holds 'ep ', and must not pay a search for an 'Ep N' it cannot hold
    wants_epoch = found.epoch is None and ("epoch" in low or low.count("ep ") > low.count("step "))
    wants_step = found.step is None and ("step" in low or "iter" in low)
    for ks, ke, vs, ve in found.spans("step-word", _space_pair_spans, line) if wants_epoch or wants_step else ():
        k = line[ks:ke].lower()
        v = float(line[vs:ve])
        if k in ("epoch", "ep") and found.epoch is None:
            found.epoch = v
        elif k != "epoch" and found.step is None:
            found.step = v
    return False


def _megatron_iteration(line: str) -> bool:
    return _MEGATRON_ITER.match(line) is not None


@_format("megatron-nan")
def _megatron_missing_loss(line: str, low: str, found: Found) -> bool:
    """Megatron's iteration line with nothing skipped and no loss field: the loss was NaN (see _MEGATRON_ITER)."""
    # _MEGATRON_NOTHING_SKIPPED names digits ('1.0', '0'): searched on every line, never taken from the memo
    if found.spans("megatron-nan", _megatron_iteration, line) and _MEGATRON_NOTHING_SKIPPED.search(line) and not _ANY_LOSS.search(line):
        found.values["loss"] = math.nan
    return False


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


# Lines of one shape. A log prints its metric lines from a few format strings, so thousands of its lines differ only
# in their digits: `shape_of` maps every ASCII digit to '0'. The patterns the formats search with are digit-blind:
# none names a digit, and every character class holds all ten digits or none (tests/engine/test_metric_shapes.py
# checks each), so on two lines of one shape a pattern matches at the same places, with the same groups' spans.
# What they found on the first line of a shape is kept by site (`Found.spans`) and read at the same offsets of the
# next; the values are read from each line's own text and every check on a value (a NaN, the sign of a rate) runs
# on each line. A memo is kept for a line of at most SHAPE_BYTES, for at most SHAPES_KEPT shapes (then begun again).
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_MISSING = object()
SHAPE_BYTES = 4096
SHAPES_KEPT = 4096
_shapes: dict[bytes, dict[str, Any]] = {}


def shape_of(raw: bytes | bytearray) -> bytes | None:
    """The shape of a raw line (its bytes with every ASCII digit made '0'), or None when it is too long to keep."""
    return bytes(raw).translate(_ZERO_DIGITS) if len(raw) <= SHAPE_BYTES else None


def shape_memo(shape: bytes | None) -> dict[str, Any] | None:
    """What the digit-blind patterns found on the first line of this shape, by site (filled as they search)."""
    if shape is None:
        return None
    memo = _shapes.get(shape)
    if memo is None:
        if len(_shapes) >= SHAPES_KEPT:
            _shapes.clear()
        memo = _shapes[shape] = {}
    return memo


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
            and (part := _lone_loss_part(text)) is not None):
        found.values["loss"] = part
    if not found.values:
        return None
    _fold_eval_split(low, found)
    return found.values, found.step, found.epoch


# A loss named for its network or term ('loss_net: nan', 'gen_loss=0.41'), not a known name: the loss of a training record
# (a line with a counter or another metric) when it is the only such term on it. Several terms (mmdet's loss_rpn_cls and
# loss_bbox, a GAN's d_loss and g_loss), a term printed on a line of its own ('>>> loss_cls: 0.08' under a total) or one of
# a held-out split or a summary ('Min_val_loss') name no one training loss.
_LOSS_PART = lazy(r"(?i)(?<![\w/.-])(?P<key>loss_[a-z][a-z0-9_]{0,30}|[a-z][a-z0-9_]{0,30}_loss)\s*+[:=]\s*+(?P<val>" + _NUM + r")(?![\w.])")
_NOT_TRAINING = frozenset({"val", "valid", "validation", "eval", "test", "dev", "min", "max", "best", "mean", "avg"})


def _lone_loss_part(text: str) -> float | None:
    parts = {m["key"].lower(): m["val"] for m in _LOSS_PART.finditer(text)
             if canonical(m["key"]) is None and not _NOT_TRAINING.intersection(m["key"].lower().split("_"))}
    return _num(next(iter(parts.values()))) if len(parts) == 1 else None


# A line whose label, before its first metric, names an evaluation split: the MNIST example's 'Test set: Average
# loss: 0.0025', '[Test set] Average loss', 'Validation: loss 0.3', fairseq's 'valid on 'valid' subset | loss 4.2',
# timm's 'Test: [ 60/196] ... Loss: 9.87'. Its bare 'loss' and 'acc' are the evaluation's, not training's.
_EVAL_LABEL = lazy(r"(?<![/\w.-])(?:test|testing|val|valid|validation|validating|eval|evaluation|evaluating|dev)(?![/\w.-])")
_TRAIN_LABEL = lazy(r"(?<![/\w.-])train(?:ing)?(?![/\w.-])")
_FIRST_METRIC = lazy(r"loss|acc")


def _eval_labelled(low: str) -> bool:
    m = _FIRST_METRIC.search(low)
    label = low[: m.start()] if m else ""
    return bool(label) and _EVAL_LABEL.search(label) is not None and _TRAIN_LABEL.search(label) is None


def _fold_eval_split(low: str, found: Found) -> None:
    values = found.values
    if "loss" not in values and "acc" not in values:
        return  # nothing to fold (a bar's throughput, an lr line): no search on every such line
    if not found.spans("eval-label", _eval_labelled, low):
        return
    for train, held in (("loss", "val_loss"), ("acc", "val_acc")):
        if train in values and held not in values:
            values[held] = values.pop(train)
