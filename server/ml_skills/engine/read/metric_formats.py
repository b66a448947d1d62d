"""The line formats people really print metrics in, each a parser registered in order of precedence.

HF Trainer dicts (`{'loss': 2.3, 'grad_norm': 1.1, 'epoch': 0.5}`), JSON lines, `key=value`
and `key: value` (also with spaces in keys, as Megatron writes `lm loss: 7.1E+00`), tqdm and
Lightning bars (`Epoch 0:  45%|...| 450/1000 [..., loss=0.51]`), Keras
(`- loss: 0.23 - val_loss: 0.35`), DeepSpeed (`step=100, skipped=0, lr=[0.0001]`) and nanoGPT
(`iter 100: loss 2.3, time 20ms`). What each key names is metric_keys.py's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator

from ml_skills.engine.read.metric_keys import EPOCH, STEP, WORD_BEFORE, named_loss, pair_key
from ml_skills.engine.read.metric_shapes import Found
from ml_skills.lazyre import lazy
from ml_skills.models import EPOCH_KEYS, STEP_KEYS, canonical
from ml_skills.safety import untrusted_json

# a non-finite value may be zero-padded (Python's '{:07.3f}' of NaN prints '0000nan') or carry a '.0' ('nan.0'): either
# is read as the NaN it is, never as the padding's 0 (digits as such, not zeros: a memo site's pattern names no digit).
# A number's digits are read by one quantifier each side of its point ('\d+\.?\d*' tried every split of a run of
# digits when what follows failed: a line of 'loss ' and 3,000 zeros took 0.35 s, twenty such lines 7 s)
_NUM = r"[-+]?(?:\d*(?:nan|NaN|NAN|inf|Inf|INF)(?:\.\d+)?(?![\w.])|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|NaN|NAN|-?Infinity|inf|Inf|INF|-inf|-Inf)"
_PAIR = lazy(
    r"(?:^|[\s|,;{(\[-])['\"]?(?P<key>[A-Za-z_][\w/.\-]*(?: [A-Za-z_][\w/]*){0,2}(?: \([a-z]+\))?)['\"]?\s*(?:(?:::?|=)\s*)\[?(?:tensor\()?(?P<val>" + _NUM + r")(?=[\s,|;}\])%a-zA-Z]|:\s|:$|$)"
)
_SEGMENT = lazy(r"^\s*(?P<key>[A-Za-z_][\w/.\-]*(?: [a-z_][\w/]*){0,2})\s+(?P<val>" + _NUM + r")\s*[a-zA-Z%]{0,3}\s*$")
# `epoch 3`, `Epoch 3/10`, the tutorials' `Epoch [3/10]` / `Epoch: [3/10]`, and hand-written loops' `Ep 20 | Loss 0.1`
# (each run of spaces read by one quantifier: `\s*:?\s*\[` tried every split of a run between two, 30 ms for 'epoch' and
# 4,000 spaces, a 2 MB log of such lines 7.8 s; twenty-fourth round)
_SPACE_PAIR = lazy(r"\b(?P<key>step|iter|iteration|epoch|Epoch|Ep|Step|Iter|Iteration|EPOCH|STEP|ITER|ITERATION)(?:\s+|\s*(?::\s*)?\[\s*)(?P<val>\d+(?:\.\d+)?)(?:\s*/\s*(?P<total>\d+))?\b")
# `loss 2.31`, `train loss is 0.4`: matched on the lower-cased line, from the literal (the word before is checked after)
_WORD_NUM = lazy(r"loss\s+(?:is\s+)?(?P<val>" + _NUM.lower() + r")(?!\w|\.\d)")
_NAMED_NUM = lazy(r"(?:^|[\s|,;(\[])(?P<key>[A-Za-z][\w/.]*(?:@\d)?)\s+(?P<val>" + _NUM + r")(?=[\s,|;)\]]|$)")
_TQDM = lazy(r"(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*\[(?P<elapsed>[\d:]+)<(?P<eta>[\d:?]+),\s*(?P<rate>\d+(?:\.\d+)?)\s*(?P<unit>[a-zA-Z/]+)(?P<rest>[^\]]*)\]")
# Megatron's iteration line prints a loss only when its average is > 0, so a NaN loss silently disappears from it
# (training_log: `if avg > 0.0`); with nothing skipped (loss scale 1.0, or 0 skipped iterations) no loss field means NaN
_MEGATRON_ITER = lazy(r"^\s*iteration\s+\d+\s*/\s*\d+\s*\|")
_MEGATRON_NOTHING_SKIPPED = lazy(r"\|\s*loss scale: 1\.0\b|number of skipped iterations:\s*0\b")
_ANY_LOSS = lazy(r"(?i)loss(?! scale)")


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        bare = text.lstrip("+-").lstrip("0123456789").split(".")[0]  # '0000nan', 'nan.0'
        if bare.lower() not in ("nan", "inf"):
            raise
        return float(("-" if text.startswith("-") else "") + bare)


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


# LightGBM's and XGBoost's evaluation lines: a round counter, then each watched set's metrics
# ('[2700]\tvalid's auc: 0.757849', '[100]\ttraining's binary_logloss: 0.31\tvalid_1's binary_logloss: 0.42',
# '[500]\teval-logloss:0.41906\ttrain-logloss:0.160439'); a score (AUC, NDCG, MAP) is read as the set's accuracy
_GBM_ROUND = lazy(r"^\s*(?:\[[\d:]+\]\s+)?\[(?P<n>\d+)\]:?\s")
_GBM_PAIR = lazy(r"(?P<set>[A-Za-z_]\w{0,40})(?:'s |-)(?P<metric>[A-Za-z_][\w@.]{0,40})\s*:\s*(?P<val>" + _NUM + r")")
_GBM_SCORES = frozenset({"auc", "aucpr", "average_precision", "ndcg", "map", "accuracy", "acc"})
_GBM_TRAIN_SETS = frozenset({"train", "training", "dtrain", "train_0", "learn"})


def _gbm_round(line: str) -> tuple[int, int, int] | None:
    """The round counter's span and where the watched sets begin (digit-blind: kept per line shape)."""
    head = _GBM_ROUND.match(line)
    return None if head is None else (*head.span("n"), head.end())


@_format("gbm-rounds")
def _gbm_rounds(line: str, low: str, found: Found) -> bool:
    """A boosting round's evaluation line: the round is the step; every watched set's metric, by the set's role."""
    if not line[:1].isspace() and line[:1] != "[" or (head := found.spans("gbm-rounds", _gbm_round, line)) is None:
        return False
    n_start, n_end, sets = head
    read = False
    for m in _GBM_PAIR.finditer(line, sets):
        metric = m["metric"].lower().split("@")[0]
        train = m["set"].lower() in _GBM_TRAIN_SETS
        if metric in _GBM_SCORES:
            name = "acc" if train else "val_acc"
        elif (c := canonical(f"{'train' if train else 'valid'}-{metric.replace('binary_', '').replace('multi_', 'm')}")) is not None:
            name = c
        else:
            continue
        found.values.setdefault(name, _num(m["val"]))
        read = True
    if read:
        found.step = float(line[n_start:n_end])
    return read


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


# where a pair may start (a key's first letter after the line's start or a separator, a quote between), and the run of a
# key's characters from a place: '-' both starts a pair and is part of a key
_PAIR_START = lazy(r"(?:^|[\s|,;{(\[-])(?=['\"]?[A-Za-z_])")
_KEY_RUN = lazy(r"['\"]?[\w/.\-]*+")
_INNER_DASH = lazy(r"[\w/.\-]-[A-Za-z_]")  # a '-' inside a key that starts a pair: without one, no start can be skipped


def pair_matches(line: str) -> Iterator[re.Match[str]]:
    """`_PAIR.finditer(line)`, trying only the starts that can match.

    '-' both starts a pair and is part of a key: searched, every '-' of a run like 'a-a-a-...' read the run to its end
    and back, 0.4 s for a line of 4,000 (thirty such lines held the CLI 12 s; twenty-fifth round). A '-' inside the key a
    failed start read, with a key character after it, starts no pair either: its key ends where that key ended (what
    follows a key's characters is none of them), so what follows is the same and fails the same."""
    if _INNER_DASH.search(line) is None:
        yield from _PAIR.finditer(line)  # every start's key is its own: the search is linear as it is
        return
    failed_to = -1  # a '-' at or before this place lies inside a failed start's key, a key character after it
    pos = 0
    for c in _PAIR_START.finditer(line):
        i = c.start()
        if i < pos or line[i] == "-" and i <= failed_to:
            continue
        m = _PAIR.match(line, i)
        if m is not None:
            yield m
            pos = m.end()
        else:  # the key after this separator (or the line's start: both, at 0) read no pair
            key = _KEY_RUN.match(line, c.end())
            failed_to = max(failed_to, (key.end() if key is not None else c.end()) - 2)


def _pair_spans(line: str) -> tuple[tuple[int, int, int, int], ...]:
    return tuple((*m.span("key"), *m.span("val")) for m in pair_matches(line))


@_format("key-value")
def _key_values(line: str, low: str, found: Found) -> bool:
    """`key=value`, `key: value`, Keras' `- loss: 0.23`, keys of a few words (`lm loss: 7.1E+00`)."""
    values = found.values
    for ks, ke, vs, ve in found.spans("key-value", _pair_spans, line):
        kind, name, in_ms = pair_key(line[ks:ke])
        try:
            val = _num(line[vs:ve])
        except ValueError:
            continue
        if kind == STEP:
            if found.step is None and not math.isnan(val):
                found.step = val
        elif kind == EPOCH:
            found.epoch = val
        elif name is not None:
            values.setdefault(name, val / 1000.0 if in_ms else val)
        elif not math.isfinite(val) and named_loss(line[ks:ke].lower().strip()):
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
        c = next((c for w, c in WORD_BEFORE.items() if low.endswith(w, 0, s) and (s == len(w) or not _is_word(low[s - len(w) - 1]))), "loss")
        found.values.setdefault(c, _num(low[vs:ve]))
    return False


# a schedule's own report of the rate it set: 'Updating learning rate to 1.68e-24' (Time-Series-Library's
# adjust_learning_rate), 'lr changed to 0.001', 'learning rate reduced to 1e-05'
_LR_TO = lazy(r"(?:learning[ _]rate|(?<![\w])lr)\s+(?:(?:changed|set|updated|adjusted|decayed|reduced|dropped|decreased|increased)\s+)?to:?\s+(?P<val>"
              + _NUM.lower() + r")(?!\w|\.\d)")


def _lr_to_spans(low: str) -> tuple[tuple[int, int], ...]:
    return tuple(m.span("val") for m in _LR_TO.finditer(low))


@_format("lr-to")
def _lr_set_to(line: str, low: str, found: Found) -> bool:
    """A learning rate announced as set to a value."""
    if "to" in low:
        for vs, ve in found.spans("lr-to", _lr_to_spans, low):
            found.values.setdefault("lr", _num(low[vs:ve]))
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


# A loss named for its network or term ('loss_net: nan', 'gen_loss=0.41'), not a known name: the loss of a training record
# (a line with a counter or another metric) when it is the only such term on it. Several terms (mmdet's loss_rpn_cls and
# loss_bbox, a GAN's d_loss and g_loss), a term printed on a line of its own ('>>> loss_cls: 0.08' under a total) or one of
# a held-out split or a summary ('Min_val_loss') name no one training loss.
_LOSS_PART = lazy(r"(?i)(?<![\w/.-])(?P<key>loss_[a-z][a-z0-9_]{0,30}|[a-z][a-z0-9_]{0,30}_loss)\s*+[:=]\s*+(?P<val>" + _NUM + r")(?![\w.])")
_NOT_TRAINING = frozenset({"val", "valid", "validation", "eval", "test", "dev", "min", "max", "best", "mean", "avg"})
# terms of a loss: a name no format knows, or a part the engine reads on its own (a GAN's two sides, a box loss)
_TERMS = frozenset({None, "g_loss", "d_loss", "box_loss"})


def lone_loss_part(text: str) -> float | None:
    """The value of the one loss term on a line no format read a loss from, or None (parse_line asks last)."""
    parts = {m["key"].lower(): m["val"] for m in _LOSS_PART.finditer(text)
             if canonical(m["key"]) in _TERMS and not _NOT_TRAINING.intersection(m["key"].lower().split("_"))}
    return _num(next(iter(parts.values()))) if len(parts) == 1 else None
