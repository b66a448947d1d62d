"""Remove what a reader cannot see: terminal escapes, control and format characters, invisible code points.

They hide or reorder text a person reads (a right-to-left override, an OSC 8 link), carry hidden
text (tag characters, variation selectors after an emoji), or split a token so no pattern sees it
(`hf_Ab<ZWSP>3...`). The set is Unicode's Default_Ignorable_Code_Point property plus the Cc and Cf
categories (tab and newline kept), and the line and paragraph separators, which some readers
break lines on. Stripping runs before redaction (safety/redact.py), so a secret split by any of
them is joined again and caught.
"""

from __future__ import annotations

import re

from ml_skills.lazyre import lazy

# CSI / OSC / other ESC sequences (and the C1 CSI), removed whole so their parameters go too.
_ESCAPES = lazy(r"\x1b\[[0-?]{0,64}[ -/]{0,16}[@-~]|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?|\x9b[0-?]{0,64}[ -/]{0,16}[@-~]")
_KEPT = lazy(r"[A-Za-z0-9_\-@=:./]")  # what an escape gives the joined readings: its letters, digits, separators

# Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode 15.1) united with Cc and Cf
# (UnicodeData.txt), minus tab and newline, and U+2800 BRAILLE PATTERN BLANK, printable but drawn as nothing (a token
# split by it was shown whole in two pieces: sixty-fifth round); tests/security/test_sixtysixth_round.py checks the Cc
# and Cf part against the running Python's unicodedata.
INVISIBLE_CLASS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u2800"  # C0 (not tab, newline), DEL, C1, soft hyphen, grapheme joiner, braille blank
    "\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"  # Arabic and Syriac format characters, Arabic letter mark
    "\u115f\u1160\u17b4\u17b5\u180b-\u180f"  # Hangul fillers, Khmer inherent vowels, Mongolian selectors and vowel separator
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f"  # zero-width, bidi marks, line/paragraph separators, embeddings, overrides, isolates
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"  # Hangul filler, variation selectors, BOM, interlinear annotation
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"  # tag characters, variation selectors supplement, reserved ignorables
)
_INVISIBLE = lazy(f"[{INVISIBLE_CLASS}]+")
# Lone surrogates: a file name that is not UTF-8 comes back from the OS with its bad bytes as U+DC80-U+DCFF
# (surrogateescape), and a JSON request can spell \ud800. No UTF-8 output can hold them: one such file name in a
# run directory made every report, JSON file and MCP answer fail to serialise (check-failed-run: internal error).
_SURROGATE = lazy("[\ud800-\udfff]")
_ANY = lazy(f"[\x1b{INVISIBLE_CLASS}\ud800-\udfff\ufffd]")
_ANY_ASCII = lazy("[\x00-\x08\x0b-\x1f\x7f]")  # most log text is ASCII: a small class is scanned several times faster


def strip_invisible(text: str) -> tuple[str, int]:
    """Remove escapes and invisible or reordering characters; return the text and how many characters went. The secrets
    a joined reading holds (an escape's letters kept, a U+FFFD or a bad byte left out: see joined_readings) are masked too,
    and counted in this context's redactions."""
    text, n, masks = stripped_and_masked(text)
    if masks:
        from ml_skills.safety.redact import count_masks  # redaction reads through this module: imported when used

        count_masks(masks)
    return text, n


def stripped_and_masked(text: str) -> tuple[str, int, int]:
    """strip_invisible's text and count, and how many secrets its joined readings masked, counted by no one (redaction
    counts them with its own, so a text it remembers counts the same each time)."""
    if not (_ANY_ASCII if text.isascii() else _ANY).search(text):
        return text, 0, 0
    readings = joined_readings(text)
    text, n = _stripped(text)
    masks = 0
    for joined in readings:
        if joined != text:
            from ml_skills.safety.redact import masked_as_joined

            text, k = masked_as_joined(text, joined)
            masks += k
    return text, n, masks


def hidden_characters(text: str) -> int:
    """How many characters strip_invisible would remove (a check only: nothing masked, nothing counted)."""
    if not (_ANY_ASCII if text.isascii() else _ANY).search(text):
        return 0
    return _stripped(text)[1]


def _stripped(text: str) -> tuple[str, int]:
    n = 0

    def count(m: re.Match[str]) -> str:
        nonlocal n
        n += len(m.group(0))
        return ""

    text = _ESCAPES.sub(count, text)
    text = _INVISIBLE.sub(count, text)
    text = _SURROGATE.sub(_byte, text)
    return text, n


def joined_readings(text: str) -> list[str]:
    """The text as redaction also reads it (safety/redact.py), beside the stripped text: none when it holds no escape, no
    U+FFFD and no byte that is not UTF-8. Stripped, with U+FFFD and each such byte left out, and each escape replaced by its
    own letters, digits and separators (`_ - @ = : . /`), in three readings: with its final character (`ESC @` ate the `@` of
    `postgres://admin:PW ESC @ db`), without it (`"password" ESC [ : x "PW"` hid the `:` before the command letter `x`), and
    a two-character escape's second character only (`ESC N` and a colour code in one token).

    Stripping removes an escape whole, and `ESC N` (or `ESC [ 12 B`) takes the letters after it: a token so split lost one of
    its own and escaped redaction (sixty-fifth round); an escape that ate a secret's separator hid the secret's shape
    (sixty-eighth round), also beside a character that is no letter or digit (seventieth round: `PW! ESC @ db`); and a byte
    that is not UTF-8, shown as U+FFFD or, in a file name, as `\\xff`, split a token in two pieces, each short of its shape.
    What is shown stays the stripped text: an escape's letter may as well be one planted inside a keyword (`X-API-K ESC B
    EY:`), and the mark of a bad byte is information; only the secrets a reading holds are masked in it."""
    escapes = "\x1b" in text or "\x9b" in text
    bad = "\ufffd" in text or _SURROGATE.search(text) is not None
    if not escapes and not bad:
        return []
    base = _SURROGATE.sub("", text) if bad else text
    if not escapes:
        return [_stripped(base)[0].replace("\ufffd", "")]
    readings = [_stripped(_ESCAPES.sub(kept, base))[0].replace("\ufffd", "")
                for kept in (_kept_with_final, _kept_without_final, _kept_if_two_characters)]
    return list(dict.fromkeys(readings))


def _kept_if_two_characters(m: re.Match[str]) -> str:
    """A third reading, for a text that mixes kinds (seventy-second round: `ESC N` ate a token's own `N` while a colour code
    `ESC [ = m` inside it added `=m`): a two-character escape gives back its second character, a longer one nothing."""
    s = m.group(0)
    return "".join(_KEPT.findall(s[1:])) if len(s) == 2 else ""


def _kept_with_final(m: re.Match[str]) -> str:
    return "".join(_KEPT.findall(m.group(0)))


def _kept_without_final(m: re.Match[str]) -> str:
    return "".join(_KEPT.findall(m.group(0)[:-1]))


def _byte(m: re.Match[str]) -> str:
    """A byte a file name held that is not UTF-8, shown as `\\xff`; any other lone surrogate as U+FFFD."""
    c = ord(m.group(0))
    return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else "\ufffd"
