"""Would a learned reader of a log's terminal block help where the rules abstain or are wrong?

Measured prospectively: for each History batch, a TF-IDF + logistic-regression reader is trained only on the
corpus cases numbered below the batch (what existed when the batch arrived), then asked about the batch's
prospective verdicts (bench/prospective.json, the rule engine's verdicts before any change the batch prompted).
Two uses are scored: answering where the rules abstained (at several probability thresholds), and demoting a
rule verdict to an abstention when the reader gives its class a low probability. The product ships neither
(docs/accuracy.md says why); this script keeps the measurement repeatable. Needs scikit-learn (not a dependency
of the product): `pip install scikit-learn`.

    python bench/reader_experiment.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ERRORISH = re.compile(r"error|exception|traceback|killed|fatal|fail|nan|inf\b|timeout|timed out|abort|signal|denied|"
                      r"quota|oom|memory|exit|terminat|assert|warn|refused|not found|no such|diverg|stuck|hang", re.IGNORECASE)
TOKENS = r"(?u)\b[A-Za-z_][A-Za-z_\.]{1,40}\b"


def terminal_block(text: str, tail: int = 60, cap: int = 150) -> str:
    """The last `tail` lines plus up to `cap` error-ish lines before them, numbers blanked."""
    lines = text.splitlines()
    kept = [ln for ln in lines[:-tail] if ERRORISH.search(ln)][-cap:] + lines[-tail:]
    return re.sub(r"0x[0-9a-f]+|\d+", " ", "\n".join(ln[:400] for ln in kept))


def main() -> int:
    try:
        import numpy as np
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        print("needs scikit-learn: pip install scikit-learn", file=sys.stderr)
        return 2
    cases = {}
    for d in sorted((ROOT / "tests" / "corpus").glob("[0-9]*-*")):
        label = json.loads((d / "case.json").read_text())
        cases[d.name] = (int(d.name.split("-")[0]), label["primary_cause"], set(label.get("acceptable", [])),
                         terminal_block((d / "train.log").read_text(errors="replace")))
    verdicts = json.loads((ROOT / "bench" / "prospective.json").read_text())
    batches: list[tuple[str, list[dict]]] = []
    for v in verdicts:
        if batches and batches[-1][0] == v["commit"]:
            batches[-1][1].append(v)
        else:
            batches.append((v["commit"], [v]))
    answered: list[tuple[float, bool]] = []  # where the rules abstained: (reader's probability, reader right)
    demoted: list[tuple[float, bool]] = []  # where the rules named a class: (reader's probability of it, rules right)
    for _, batch in batches:
        first = min(int(v["case"].split("-")[0]) for v in batch)
        train = [c for c in cases.values() if c[0] < first]
        if len(train) < 60:
            continue
        vec = TfidfVectorizer(token_pattern=TOKENS, ngram_range=(1, 2), min_df=2, sublinear_tf=True)
        model = LogisticRegression(C=100, max_iter=2000, class_weight="balanced")
        model.fit(vec.fit_transform([c[3] for c in train]), [c[1] for c in train])
        classes = list(model.classes_)
        for v in batch:
            if v["case"] not in cases:
                continue
            _, want, ok_too, text = cases[v["case"]]
            p = model.predict_proba(vec.transform([text]))[0]
            if v["predicted"] is None:
                guess = classes[int(np.argmax(p))]
                answered.append((float(p.max()), guess == want or guess in ok_too))
            else:
                prob = float(p[classes.index(v["predicted"])]) if v["predicted"] in classes else 0.0
                demoted.append((prob, v["predicted"] == want or v["predicted"] in ok_too))
    print(f"rules abstained on {len(answered)} prospective verdicts; the reader's answer there:")
    print("| reader's probability >= | answered | right | wrong |\n| --- | --- | --- | --- |")
    for th in (0.0, 0.4, 0.5, 0.6, 0.7, 0.8):
        s = [ok for p, ok in answered if p >= th]
        print(f"| {th:.1f} | {len(s)} | {sum(s)} | {len(s) - sum(s)} |")
    print(f"\nrules named a class on {len(demoted)} ({sum(not ok for _, ok in demoted)} wrong); "
          "demoting it to an abstention when the reader gives it a low probability:")
    print("| reader's probability of the rules' class < | demoted | right lost | wrong removed |\n| --- | --- | --- | --- |")
    for th in (0.02, 0.05, 0.1, 0.2):
        s = [ok for p, ok in demoted if p < th]
        print(f"| {th} | {len(s)} | {sum(s)} | {len(s) - sum(s)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
