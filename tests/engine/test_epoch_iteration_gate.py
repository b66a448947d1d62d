"""counters.epoch_iteration reads a line lower-cased with a case-sensitive pattern, after a substring gate, unless it
holds one of counters.ASCII_FOLDS: the same (epoch, iteration, iterations) as the (?i) pattern on every line of every
real log, on lines of the benchmark log (its progress bars are not ASCII), and on spellings made to tell them apart
(upper case, a dotless i that (?i) reads as i, no gate word); ASCII_FOLDS is what the running Python's Unicode says."""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.read import counters

from bench.genlog import generate


def reference(line: str) -> tuple[float, float, float | None] | None:
    m = counters._EPOCH_ITER.search(line[:400])
    if m is None:
        return None
    k = next(i for i in "123456" if m[f"e{i}"] is not None)
    n = m.groupdict().get(f"n{k}")  # MXNet's 'Epoch[0] Batch [41940-41960]' form prints no total
    return float(m[f"e{k}"]), float(m[f"i{k}"]), float(n) if n is not None else None


MADE = ["EPOCH(TRAIN) [3][10/20]", "Epoch: [8][208/2000] loss 1.2", "[Epoch 8/100] [BATCH 208/2000]", "E6 ITER[ 14/ 15]",
        "TRAIN EPOCH: 8 [26624/60000 (44%)]", "[Epoch 1/2] [Iteration 3/4]", "e6 iter[1/2]", "epoch 3 of 10", "iter[3/4]",
        "E6 \u0131ter[ 14/ 15]", "[Epoch 1/2] [\u0130teration 3/4]", "Epoch [1][2/3] \u00e9", "x" * 399 + "Epoch [1][2/3]",
        "\u00c9POCH [1][2/3] \u2588\u2588", "EPOCH \u0661 [1][2/3]", "Epoch [\u0661][\u0662/\u0663] \u212a"]


def test_the_gated_lower_case_read_agrees_with_the_case_folding_pattern(tmp_path: Path) -> None:
    root = Path(__file__).parents[1]
    lines = list(MADE)
    for log in sorted(root.glob("corpus/*/train.log")) + sorted(root.glob("healthy/*/train.log")):
        lines += log.read_text("utf-8", errors="replace").splitlines()
    generate(tmp_path / "bench.log", 2**20, seed=4)
    lines += (tmp_path / "bench.log").read_text("utf-8", errors="replace").splitlines()
    got = [counters.epoch_iteration(line) for line in lines]
    assert got == [reference(line) for line in lines]
    assert sum(g is not None for g in got) > 100  # the real logs do print epochs and iterations together
    assert all(g is not None for g in got[:7]) and all(g is None for g in got[7:9])
    assert got[9] == (6.0, 14.0, 15.0) and got[10] == (1.0, 3.0, 4.0)  # non-ASCII lines: the folding pattern itself


def test_the_folding_characters_are_all_there_are() -> None:
    """Beyond ASCII, only ASCII_FOLDS match an ASCII letter under (?i), or lower-case to ASCII or to two characters;
    and lower() keeps every other character a word character, a digit, a space or none of them, as it was."""
    import re
    import sys

    letter = re.compile("(?i)[a-z]")
    word, digit, space = re.compile(r"\w"), re.compile(r"\d"), re.compile(r"\s")
    folds = ""
    for x in range(128, sys.maxunicode + 1):
        ch = chr(x)
        low = ch.lower()
        if letter.match(ch) or len(low) != 1 or low.isascii():
            folds += ch
        elif low != ch:
            assert [bool(p.match(ch)) for p in (word, digit, space)] == [bool(p.match(low)) for p in (word, digit, space)], hex(x)
    assert folds == counters.ASCII_FOLDS
