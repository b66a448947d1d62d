"""Would a learned second opinion help where the rules abstain? A measure, not a feature (issue 13).

    python bench/second_opinion.py [--threshold 0.7]

A bag-of-words logistic regression over each log's last 500 lines (what the engine keeps as its tail), trained on
the labelled corpus plus the healthy set as one more class, 'healthy'. It would be used only where the rules name no
class, and only when its top class is a failure class with probability >= the threshold. Two measures:

- leave-one-batch-out: for each batch of bench/prospective.json (the verdicts each batch got from the engine that
  first met it), train on every other case and predict the cases the rules abstained on;
- prospective: train on the cases that existed before a batch was collected (--before N: corpus numbers < N,
  healthy numbers < --healthy-before) and predict that batch's abstentions and its healthy logs whose status the
  engine left open (unknown, hung, crashed), where a named class is a false alarm.

Needs scikit-learn (installed with mlflow, so with the test extra). The result is written in docs/accuracy.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN = r"[A-Za-z][A-Za-z0-9_]{1,39}"


def tail(path: Path, n: int = 500) -> str:
    return "\n".join(path.read_bytes().decode("utf-8", "replace").splitlines()[-n:])


def cases(kind: str) -> dict[int, Path]:
    return {int(p.name.split("-")[0]): p for p in (ROOT / "tests" / kind).iterdir() if p.name.split("-")[0].isdigit()}


def model(texts: list[str], labels: list[str]):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    vec = TfidfVectorizer(token_pattern=TOKEN, sublinear_tf=True, min_df=2, max_features=60000)
    clf = LogisticRegression(C=30, max_iter=3000).fit(vec.fit_transform(texts), labels)

    def guess(text: str) -> tuple[str, float]:
        p = clf.predict_proba(vec.transform([text]))[0]
        return str(clf.classes_[p.argmax()]), float(p.max())
    return guess


def label(p: Path) -> tuple[str, set[str]]:
    m = json.loads((p / "case.json").read_text())
    return m["primary_cause"], {m["primary_cause"], *m.get("acceptable", [])}


def leave_one_batch_out(threshold: float) -> tuple[int, int, int]:
    corpus, healthy = cases("corpus"), cases("healthy")
    records = json.loads((ROOT / "bench" / "prospective.json").read_text())
    batch, k, prev = {}, 0, None
    for r in records:
        k += r["commit"] != prev
        prev = r["commit"]
        batch[int(r["case"].split("-")[0])] = k
    abstained = {int(r["case"].split("-")[0]) for r in records if r.get("predicted") is None}
    htexts = [tail(p / "train.log") for p in healthy.values()]
    right = wrong = 0
    for b in sorted(set(batch.values())):
        test = [n for n in corpus if batch.get(n) == b and n in abstained]
        if not test:
            continue
        train = [n for n in corpus if batch.get(n) != b]
        guess = model([tail(corpus[n] / "train.log") for n in train] + htexts, [label(corpus[n])[0] for n in train] + ["healthy"] * len(htexts))
        for n in test:
            cls, p = guess(tail(corpus[n] / "train.log"))
            if cls != "healthy" and p >= threshold:
                right += cls in label(corpus[n])[1]
                wrong += cls not in label(corpus[n])[1]
    return right, wrong, len(abstained)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threshold", type=float, default=0.7)
    ap.add_argument("--before", type=int, default=920, help="train on corpus cases below this number (the batch starts here)")
    ap.add_argument("--healthy-before", type=int, default=215)
    ap.add_argument("--abstained", default="922,927,940,941,944,948,951,952,955,956,957,958,959,960,965,967",
                    help="the batch's cases the rules abstained on (bench/history.json's row for it)")
    ap.add_argument("--open-healthy", default="217,218,219,223,224,228,232,236,237",
                    help="the batch's completed or running healthy cases whose status the engine left unknown or hung")
    a = ap.parse_args(argv)
    right, wrong, n = leave_one_batch_out(a.threshold)
    print(f"leave-one-batch-out, p >= {a.threshold}: of {n} abstentions, {right} named right, {wrong} named wrong")
    corpus, healthy = cases("corpus"), cases("healthy")
    train = [n for n in corpus if n < a.before]
    htrain = [n for n in healthy if n < a.healthy_before]
    guess = model([tail(corpus[n] / "train.log") for n in train] + [tail(healthy[n] / "train.log") for n in htrain],
                  [label(corpus[n])[0] for n in train] + ["healthy"] * len(htrain))
    named = [(n, *guess(tail(corpus[n] / "train.log"))) for n in map(int, a.abstained.split(","))]
    named = [(n, c, p) for n, c, p in named if c != "healthy" and p >= a.threshold]
    alarms = [(n, *guess(tail(healthy[n] / "train.log"))) for n in map(int, a.open_healthy.split(","))]
    alarms = [(n, c, p) for n, c, p in alarms if c != "healthy" and p >= a.threshold]
    print(f"prospective batch from {a.before}: named {len(named)} of its abstentions: "
          + ", ".join(f"{n} {c} {p:.2f} ({'right' if c in label(corpus[n])[1] else 'wrong'})" for n, c, p in named))
    print(f"false alarms on its open healthy logs: {len(alarms)}: " + ", ".join(f"{n} {c} {p:.2f}" for n, c, p in alarms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
