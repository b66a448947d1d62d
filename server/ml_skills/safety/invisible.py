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

# Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode 15.1) united with Cc and Cf
# (UnicodeData.txt), minus tab and newline; tests/security/test_invisible.py checks it against the
# running Python's unicodedata.
INVISIBLE_CLASS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f"  # C0 (not tab, newline), DEL, C1, soft hyphen, combining grapheme joiner
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
_ANY = lazy(f"[\x1b{INVISIBLE_CLASS}\ud800-\udfff]")
_ANY_ASCII = lazy("[\x00-\x08\x0b-\x1f\x7f]")  # most log text is ASCII: a small class is scanned several times faster


def strip_invisible(text: str) -> tuple[str, int]:
    """Remove escapes and invisible or reordering characters; return the text and how many characters went."""
    if not (_ANY_ASCII if text.isascii() else _ANY).search(text):
        return text, 0
    n = 0

    def count(m: re.Match[str]) -> str:
        nonlocal n
        n += len(m.group(0))
        return ""

    text = _ESCAPES.sub(count, text)
    text = _INVISIBLE.sub(count, text)
    text = _SURROGATE.sub(_byte, text)
    return text, n


def _byte(m: re.Match[str]) -> str:
    """A byte a file name held that is not UTF-8, shown as `\\xff`; any other lone surrogate as U+FFFD."""
    c = ord(m.group(0))
    return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else "\ufffd"
