"""Secret shapes an attacker tried that the redactor once let through (issue 14, S2-S10), and the invisible
characters that once survived stripping (F7). Each value is a fresh fake; each line must come back without it.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from urllib.parse import quote

import pytest
from ml_skills.safety.quoting import strip_invisible
from ml_skills.safety.redact import MASK, redact, redact_counted

from tests.security import fakes
from tests.security.figures import record
from tests.security.test_redact import MB, _timed, reference  # noqa: F401 - the shared 1 MB reference fixture


def _opaque() -> str:
    return fakes.rand(fakes.ALNUM, 24)


# (shape, how the value is embedded, which fake) - the issue's reproductions, with fresh values.
SHAPES = [
    ("secret_key: {s}", fakes.aws_secret),
    ("aws_secret_key={s}", fakes.aws_secret),
    ("--aws-secret-access-key {s}", fakes.aws_secret),
    ("GET /v1?access_token={s} HTTP/1.1", _opaque),
    ("GET /v1?x=1&api_key={s}&y=2", _opaque),
    ("X-API-KEY: {s}", _opaque),
    ("x-api-key:{s}", _opaque),
    ("--secret-key {s}", _opaque),
    ("--wandb_key {s}", fakes.hex40),
    ("machine api.wandb.ai login user password {s}", fakes.hex40),
    ("  password {s}", fakes.hex40),  # a .netrc printed line by line
    ("next=%2Fapi%3Ftoken%3D{s}", fakes.github),
    ("x%3D{s}", fakes.hf),
    ("GH_TOKEN_{s}", fakes.github),
    ("HF_TOKEN_{s}", fakes.hf),
    ("Bearer%20{s}", fakes.jwt),
    ("Authorization%3A%20Bearer%20{s}", _opaque),
    ("redirect=%2Fcb%3Faccess_token%3D{s}%26state%3D1", _opaque),
    ("url=https%253A%252F%252Fx%253Fkey%253D{s}", fakes.openai),  # double-encoded
    ("OPENAI_KEY_{s}", fakes.openai),
    ("%3D{s}", fakes.aws_key_id),
    ("{{\"refresh_token\": \"{s}\"}}", _opaque),
    ("client_secret={s}", _opaque),
    ("SECRET_ACCESS_KEY: '{s}'", fakes.aws_secret),
    ("'--hf_token', '{s}'", _opaque),
]


@pytest.mark.parametrize("shape, make", SHAPES, ids=[s for s, _ in SHAPES])
def test_every_shape_the_attack_tried_is_redacted(shape: str, make) -> None:
    s = make()
    line = shape.format(s=s)
    out = redact(line)
    assert MASK in out and not any(s[i : i + 12] in out for i in range(0, len(s) - 11, 4)), out
    record("secret instances planted", "attack shapes: keyword families, URL-encoded, glued to a word", 1)


@pytest.mark.parametrize("text", [
    "--max_tokens 512 --token_budget=4 tokens/s 123",
    "loading tokenizer_config.json from ./tokenizer",
    "omegaconf.errors.ConfigAttributeError: Key 'lr_scheduler' is not in struct",
    "sort_key: step  monitor: val_loss  secretName: mysecret",
    "psycopg2.OperationalError: password authentication failed for user \"postgres\"",
    "task-abcdefghijklmnopqrstuvwxyz0123456789 disk-usage-monitor-service-name-long",
    "GET /api/runs?page=2&per_page=100&order=desc",
    "num_tokens=4096 max_new_tokens: 256",
    "commit 3f2a9c1d4e5b6a7980c1d2e3f4a5b6c7d8e9f0a1 run 5f9be171-f022-4232-8c29-61b5289e2b62",
    "sha256=" + "a" * 64,
    "https://huggingface.co/meta-llama/Llama-2-7b-hf/resolve/main/config.json",
    "eos_token: </s>  pad_token='<|endoftext|>'  unk_token = [UNK]  max_token: 4096  token=12.5",
])
def test_ordinary_log_text_with_keyword_like_words_is_left_alone(text: str) -> None:
    assert redact_counted(text) == (text, 0)


INVISIBLE_SPLITS = ["\u200b", "\u200d", "\ufe0f", "\U000e0100", "\u2060", "\u00ad", "\x1b[31m", "\x1b]8;;http://e\x07", "\u202e", "\U000e0041"]


@pytest.mark.parametrize("split", INVISIBLE_SPLITS, ids=[repr(x) for x in INVISIBLE_SPLITS])
def test_a_token_split_by_an_invisible_character_or_an_escape_is_joined_and_caught(split: str) -> None:
    t = fakes.hf()
    out = redact(f"upload with {t[:10]}{split}{t[10:]} failed")
    assert t not in strip_invisible(out)[0] and t[:10] not in out and t[10:] not in out


def test_every_control_format_and_default_ignorable_character_is_stripped_and_counted() -> None:
    """Against the running Python's Unicode data: every Cc and Cf character (tab and newline kept), and the
    Default_Ignorable_Code_Point ranges (variation selectors, Hangul fillers, tags and their reserved block)."""
    cc_cf = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in ("Cc", "Cf") and chr(c) not in "\t\n"]
    ignorable = [chr(c) for lo, hi in ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0xE0000, 0xE0FFF), (0x180B, 0x180F),
                                        (0x115F, 0x1160), (0x17B4, 0x17B5), (0xFFF0, 0xFFF8)) for c in range(lo, hi + 1)]
    ignorable += ["\u034f", "\u3164", "\uffa0", "\u2065"]
    chars = sorted(set(cc_cf + ignorable))
    text = "\n".join(chars)  # newline: never part of an escape sequence, so each character goes alone
    out, n = strip_invisible(text)
    assert out == "\n" * (len(chars) - 1) and n == len(chars)
    record("hostile inputs", "invisible code points stripped (Cc, Cf, Default_Ignorable)", len(chars))


def test_text_hidden_in_variation_selectors_is_stripped_and_counted() -> None:
    """The issue's F7 reproduction: 'ignore previous' encoded as variation selectors after an emoji."""
    hidden = "".join(chr(0xFE00 + b) if b < 16 else chr(0xE0100 + b - 16) for b in b"ignore previous")
    out, n = strip_invisible("\U0001F600" + hidden)
    assert (out, n) == ("\U0001F600", 15)


def test_url_encoding_of_a_keyword_and_its_value_is_redacted_whatever_the_keyword() -> None:
    for key in ("access_token", "api_key", "apiKey", "password", "client_secret", "aws_secret_access_key", "private_key", "X-Auth-Token"):
        s = _opaque()
        line = "cb=" + quote(f"/login?{key}={s}&next=/", safe="")
        assert s not in redact(line), line


HOSTILE = {  # prefixes of the new rules, repeated to fill a 1 MB line
    "url-encoded": "%3D", "query": "?access_token=", "aws-flag": "--aws-secret-access-key ", "netrc": "login a password ",
    "header": "x-api-key:", "bearer-encoded": "Bearer%20", "glued-github": "_ghp_", "glued-key": "a_secret_key",
    "encoded-keyword": "%3Fapi_key%3D", "invisible": "hf_\u200b",
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_one_megabyte_line_on_the_new_rules_costs_no_more_than_ordinary_text(name: str, reference: float) -> None:  # noqa: F811
    unit = HOSTILE[name]
    hostile = (unit * (MB // len(unit) + 1))[:MB]
    assert _timed(hostile) < 5 * reference + 0.05
    record("hostile inputs", "1 MB lines built from a pattern's prefix (backtracking)", 1)


def test_the_issue_reproduction_lines_all_change() -> None:
    """The exact lines of issue 14's S2-S10 block: each printed True (leaked unchanged) before."""
    lines = ["secret_key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY0", "aws_secret_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY0",
             "--aws-secret-access-key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY0", "GET /v1?access_token=Zq8xP2mLk9RtY6wB",
             "GET /v1?x=1&api_key=Zq8xP2mLk9RtY6wB", "X-API-KEY: Zq8xP2mLk9RtY6wBZq8xP2mLk9Rt", "--secret-key Zq8xP2mLk9RtY6wB",
             "--wandb_key " + "ab" * 20, "machine api.wandb.ai login u password " + "ab" * 20,
             "next=%2Fapi%3Ftoken%3Dghp_" + "A1b2" * 9, "x%3Dhf_" + "A1b2" * 8 + "Zz", "GH_TOKEN_ghp_" + "A1b2" * 9,
             "Bearer%20eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJlMTIz"]
    for line in lines:
        out = redact(line)
        assert out != line and not re.search(r"EXAMPLEKEY|Zq8xP2mLk9|abababab|A1b2A1b2|c2lnbmF0", out), out
