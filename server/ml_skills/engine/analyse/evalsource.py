"""The evaluation set named by the same file as the training set: every score the run reports is on data it trained on.

Runs print their configuration near the start (a JSON or YAML dump, argparse's Namespace, `--train_file X
--validation_file X` on the command line, `TRAIN_DATA=... EVAL_DATA=...`). When the key for the training data and the
key for the evaluation (validation, dev, test) data hold the same path, the evaluation loss simply follows the training
loss down, a memorising model looks like a good one, and nothing in the metrics shows it: the one place it shows is
the configuration, so it is read there. A path is something with a directory separator or a data file's extension;
numbers, booleans and names of the same dataset ('wikitext') are not compared.
"""

from __future__ import annotations

from ml_skills.lazyre import lazy
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, LogEvidence, Severity

# key: value / key=value / "key": "value" / --key value / --key=value; possessive throughout (untrusted lines)
_PAIR = lazy(r"(?:(?<![\w.-])--(?P<flag>[A-Za-z_][\w.-]{0,60}+)(?:=|[ \t]++)|(?<![\w.-])[\"']?+(?P<key>[A-Za-z_][\w.-]{0,60}+)[\"']?+[ \t]*+[:=])"
             r"[ \t]*+[\"']?+(?P<val>[^\s\"',;)}\]|]{3,400}+)")
_TOKEN = lazy(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")  # words of a key of at most 61 characters: TRAIN_DATA, trainFile, eval_file
_TRAIN = frozenset({"train", "training", "trn"})
_EVAL = frozenset({"eval", "evaluation", "val", "valid", "validation", "dev", "test"})
_SPLIT_WORDS = ("train", "trn", "val", "eval", "dev", "test")
_DATA = frozenset({"file", "files", "path", "paths", "dir", "data", "dataset", "datasets", "set", "split", "csv", "json",
                   "jsonl", "root", "folder", "shards", "manifest", "list", "source", "src", "npy", "parquet", "txt"})
_EXT = lazy(r"(?i)\.(?:npy|npz|csv|tsv|json|jsonl|txt|parquet|arrow|tfrecords?|h5|hdf5|pkl|pt|bin|lmdb|idx|zarr|feather)$")


def _side(key: str) -> str | None:
    """'train' or 'eval' for a key naming that split's data (train_file, eval_data_path, val, VALID_SET), else None."""
    words = {w.lower() for w in _TOKEN.findall(key)}
    split = "train" if words & _TRAIN else "eval" if words & _EVAL else None
    if split is None or (words & _TRAIN and words & _EVAL):
        return None  # 'train_val_split', 'train_eval_ratio': about both sides, naming neither's data
    return split if words & _DATA or len(words) == 1 else None


def _is_path(value: str) -> bool:
    return ("/" in value or "\\" in value or _EXT.search(value) is not None) and not value.startswith(("http://", "https://"))


def eval_on_training_data(ev: LogEvidence) -> Anomaly | None:
    """The first value given both to a training-data key and to an evaluation-data key in the head or the tail."""
    seen: dict[str, dict[str, tuple[str, int]]] = {}
    for block in (ev.head, ev.tail):
        for i, line in enumerate(block.lines if block else []):
            low = line.lower()
            if len(line) > 4000 or not any(w in low for w in _SPLIT_WORDS):
                continue
            for m in _PAIR.finditer(line):
                key, value = m["flag"] or m["key"], m["val"].rstrip(".")
                if (side := _side(key)) is None or not _is_path(value):
                    continue
                sides = seen.setdefault(value, {})
                sides.setdefault(side, (key, block.start_line + i))  # type: ignore[union-attr]
                if len(sides) == 2:
                    (tk, tl), (ek, el) = sides["train"], sides["eval"]
                    return Anomaly(
                        kind=AnomalyKind.EVAL_ON_TRAIN_DATA, failure_class=FailureClass.EVALUATION_MISMATCH,
                        severity=Severity.SIGNIFICANT, source=ev.source, line_no=min(tl, el),
                        detail=(f"the evaluation data is the training data: {ek} (line {el}) and {tk} (line {tl}) both name "
                                f"{value}, so every evaluation score is measured on examples the model trained on - it "
                                "cannot show overfitting or memorisation, and a held-out score will be worse"),
                    )
    return None
