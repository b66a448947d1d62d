"""Which key or label on a log line names which metric, beyond the vocabulary every source shares (models.canonical):
keys of several words ('Train Loss'), the word before a bare 'loss', a loss named for one term, a label that names an
evaluation split. The formats (metric_formats.py) read where a key and its value stand; this says what the key means."""

from __future__ import annotations

from functools import lru_cache

from ml_skills.lazyre import lazy
from ml_skills.models import EPOCH_KEYS, STEP_KEYS, canonical

# `train loss 0.4`, `val loss 0.3`: the word before a bare `loss` names its series
WORD_BEFORE = {"train ": "loss", "val ": "val_loss", "vali ": "val_loss", "valid ": "val_loss", "eval ": "val_loss", "test ": "val_loss"}
_VAL_WORDS = {"val", "vali", "valid", "validation", "eval", "evaluation", "test", "dev"}
_RECORD_WORDS = frozenset({"best", "min", "max", "lowest", "highest", "previous", "prev", "old"})


@lru_cache(maxsize=1024)
def phrase(key: str) -> str | None:
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


# a loss named for its function, with no 'loss' in the key: GluonCV's `CrossEntropy=12.2, SmoothL1=nan`, `nll: nan`
_LOSS_FUNCTIONS = frozenset({"crossentropy", "cross_entropy", "smoothl1", "smooth_l1", "nll", "bce", "ctc"})


def named_loss(key: str) -> bool:
    """A training loss by another name: a key ending in 'loss' (one part of a composite objective, a GAN's g_loss) or
    naming a loss function, not an evaluation's."""
    k = key.replace(" ", "_")
    return (k.endswith("loss") or k in _LOSS_FUNCTIONS) and not k.startswith(("val", "eval", "test", "dev", "valid"))


OTHER, STEP, EPOCH, METRIC = range(4)  # what a key of `key=value` names


@lru_cache(maxsize=4096)  # a log repeats a few dozen keys on every line
def pair_key(raw: str) -> tuple[int, str | None, bool]:
    """What a `key=value` key names (STEP, EPOCH, METRIC and its canonical name, or OTHER), and whether its value
    is in ms: worked out once per distinct key, not once per line."""
    key = raw.lower().strip()
    if key in STEP_KEYS or key.replace(" ", "_") in STEP_KEYS:
        return STEP, None, False
    if key in EPOCH_KEYS:
        return EPOCH, None, False
    c = canonical(key)
    if c is None and " " in key:
        c = phrase(key)
    return (OTHER, None, False) if c is None else (METRIC, c, c == "step_time" and "(ms)" in key)


# A line whose label, before its first metric, names an evaluation split: the MNIST example's 'Test set: Average
# loss: 0.0025', '[Test set] Average loss', 'Validation: loss 0.3', fairseq's 'valid on 'valid' subset | loss 4.2',
# timm's 'Test: [ 60/196] ... Loss: 9.87'. Its bare 'loss' and 'acc' are the evaluation's, not training's.
_EVAL_LABEL = lazy(r"(?<![/\w.-])(?:test|testing|val|vali|valid|validation|validating|eval|evaluation|evaluating|dev)(?![/\w.-])")
_TRAIN_LABEL = lazy(r"(?<![/\w.-])train(?:ing)?(?![/\w.-])")
_FIRST_METRIC = lazy(r"loss|acc")


def eval_labelled(low: str) -> bool:
    m = _FIRST_METRIC.search(low)
    label = low[: m.start()] if m else ""
    return bool(label) and _EVAL_LABEL.search(label) is not None and _TRAIN_LABEL.search(label) is None
