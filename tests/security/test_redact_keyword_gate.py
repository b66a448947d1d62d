"""The keyword gate of the redactor (issue 17) skips the two keyword rules only where they cannot match.

`_one_pass` skips cli-secret-flag and keyword-secret-assign on ASCII text with no keyword ending its word. The
reference below runs every rule as the redactor did before the gate; both must give the same text and count on
texts made of keywords in every case and spelling (Unicode folds included), separators, masks and values.
"""

from __future__ import annotations

import random
import re

from ml_skills.safety import redact as R

WORDS = ["token", "TOKEN", "Token", "tokens", "tokenizer", "num_tokens", "max_token", "api_key", "API-KEY", "apikey",
         "apikeys", "hf_token", "secret", "secrets", "SECRET", "ſecret", "ſecrets", "passwd", "Password", "password1",
         "passwords", "passphrase", "key", "keyword", "\u212aey", "wandb_key", "aws_secret_access_key", "access-key",
         "ıd", "keys", "--token", "--api-key", "-password", "Authorization", "login", "monkey", "turkey"]
SEPS = ["=", ": ", " ", "'", '"', "', '", "%3D", "%253D", "=\"", " = ", "", ",", "&", "?", "[", "(", "\t", "\n"]
VALUES = ["abc123XYZdef456", "0.5", "<pad>", "[PAD]", "hunter2hunter2", "ghp_" + "a1B2" * 9, "sk-" + "Ab3" * 10,
          "[REDACTED]", "\ue000\ue000\ue000\ue000", "x", "", "tokens/s", "1234"]


def _reference(text: str) -> tuple[str, int]:
    """`_one_pass` as it was before the gate: every rule whose needles are in the text runs."""
    total = 0
    lower = text.lower()
    for _name, needles, rx in R.RULES:
        if needles and not any(n in lower for n in needles):
            continue

        def sub(m: re.Match[str]) -> str:
            nonlocal total
            s = m.group("s")
            if R.MASK[:-1] in s or R._FILL in s or m.string.startswith(R.MASK, m.start("s")):  # _one_pass's guard (ninth round)
                return m.group(0)
            total += 1
            return R._mask(m)

        text = rx.sub(sub, text)
    return text, total


def _texts(rng: random.Random, n: int):
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts += [rng.choice(WORDS), rng.choice(SEPS), rng.choice(VALUES), rng.choice(["", " ", "; ", "/"])]
        yield "".join(parts)


def test_the_gate_changes_no_text_and_no_count() -> None:
    rng = random.Random(17)
    redacted = 0
    for text in _texts(rng, 6000):
        got, want = R._one_pass(text), _reference(text)
        assert got == want, text
        redacted += want[1] > 0
    assert redacted > 1000  # the texts do hold secrets the keyword rules catch


def test_the_gate_skips_only_ascii_text_without_a_keyword_ending_its_word() -> None:
    assert R._no_keyword("step 10 loss=2.31 tokens/s=5120 keyword=7")
    assert not R._no_keyword("max_token: abcdef123456")  # a keyword before ':' may be a secret's name
    # not ASCII: the rules' (?i) folds ſ to s, so they run ('tokens' holds a needle, so the rules are tried at all)
    assert not R._no_keyword("tokens ſecret=abcdef123456")
    assert R._one_pass("tokens ſecret=abcdef123456") == _reference("tokens ſecret=abcdef123456") == ("tokens ſecret=[REDACTED]", 1)


def _reference_settled(text: str) -> tuple[str, int]:
    """Passes of every rule, as the redactor ran them before it skipped a rule on text it had left unchanged."""
    total = 0
    for _ in range(R.MAX_PASSES):
        text, n = _reference(text)
        total += n
        if n == 0:
            break
    return text, total


def test_skipping_a_rule_on_unchanged_text_changes_no_text_and_no_count() -> None:
    """`settled` reruns a rule only when the text changed since it ran; texts built to need more than one pass (a mask
    exposing a match an earlier one consumed: `"private_key":"7"private_key":"x`, flags after flags) give what every rule
    in every pass gives, as do the random texts above."""
    rng = random.Random(52)
    several = 0
    texts = [*_texts(rng, 4000), '"private_key":"7"private_key":"x1234567', "'--token', 'a" * 50]
    for text in texts:
        want = _reference_settled(text)
        assert R.settled(text) == want, text
        several += _reference(text) != want  # one pass did not reach the fixed point
    assert several >= 4  # three of the random texts and the hand-built first one
