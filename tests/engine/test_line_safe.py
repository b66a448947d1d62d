"""matcher.line_safe copies the runs between the characters it rewrites at once: the same rewrite as reading the
pattern one character at a time (the reference below), on every pattern the engine compiles and on 200,000 random
strings of the characters it reads. The reference reads a class as `re` does: a ']' is the class's own only as its
first character (after '[' or '[^'), so an escaped '\\[' last in a class does not keep the class open."""

from __future__ import annotations

import random

from ml_skills.catalog.loader import signatures
from ml_skills.engine.plan import facts
from ml_skills.engine.read import frameworks, markers
from ml_skills.engine.read.matcher import line_safe


def reference(pattern: str) -> str:
    out: list[str] = []
    i = 0
    in_class = False
    first = -1  # the pattern index of the open class's first character
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            pair = pattern[i : i + 2]
            if pair == "\\s" and not in_class:
                out.append("[\\t\\x0b\\x0c\\r ]")
            elif pair == "\\s" and in_class:
                out.append("\\t\\x0b\\x0c\\r ")
            else:
                out.append(pair)
            i += 2
            continue
        if c == "[" and not in_class:
            in_class, first = True, i + 1
            if pattern[i + 1 : i + 2] == "^":
                out.append("[^\\n")
                i, first = i + 2, i + 2
                continue
        elif c == "]" and in_class and i != first:
            in_class = False
        elif c == "." and not in_class:
            out.append("[^\\n]")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def test_every_engine_pattern_is_rewritten_as_before():
    sigs = signatures()
    patterns = [s.pattern for s in sigs] + [s.gate for s in sigs if s.gate] + [p for _, p, _ in markers.MARKERS]
    patterns += [p for _, p in frameworks.MARKERS] + [p for p in vars(facts).values() if isinstance(p, str) and "\\" in p]
    assert len(patterns) > 150
    assert [line_safe(p) for p in patterns] == [reference(p) for p in patterns]


def test_random_strings_of_the_characters_it_reads_are_rewritten_as_before():
    rng = random.Random(17)
    alphabet = "\\[]^.s-a\n"
    for _ in range(200_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert line_safe(s) == reference(s), s


def test_a_class_ending_in_an_escaped_bracket_closes_and_the_spaces_after_it_still_match():
    """'[\\s,(\\[]' then '\\s*': the ']' after the escaped '\\[' closes the class, so the '\\s' after it is rewritten as a
    class of its own (it was spelled as the class's inside, literal tab-VT-FF-CR then a space, and matched nothing)."""
    import re

    pattern = r"(?i)(x|[\s,(\[]rewards?=nan\b|\brewards?:\s*mean=nan\b)"
    assert re.search(line_safe(pattern), "  Reward: mean=nan, min=nan")
    assert not re.search(line_safe(r"[,\[]\s*x"), "[\n x")
