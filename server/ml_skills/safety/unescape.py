"""Text as a decoder would read it: JSON escapes, HTML character references and percent-escapes of plain characters
decoded, escapes of invisible characters dropped, before the redaction rules (safety/redact.py) look for secrets.

No encoder writes a letter or a digit escaped, so such an escape only hides a token or its keyword from the rules."""

from __future__ import annotations

import re
import unicodedata

from ml_skills.lazyre import lazy
from ml_skills.safety.invisible import INVISIBLE_CLASS

# A letter, a digit or one of `_-.+/:=` written as a JSON escape (`\u0067hp_...`, Gson's `password\u003dX`): a token
# or its separator hidden from every pattern (eighth round: a Cloud Logging payload's `\u0067hp_` token came back
# whole). Decoded before redacting, until none is left: a decoded escape can complete another one, and each level
# takes six times the text, so the passes are few. (Python's `\x67` is left alone: `C:\x64\bin` is a path.) Since the
# seventy-fifth round also `@` (`\u0040`: a URL's password ends at it) and JSON's own short escape of `/` (`\/`, as PHP's
# json_encode writes every slash): `postgres:\/\/admin:PW@db` and a Slack webhook so written kept their secrets.
_PLAIN_ESCAPE = lazy(r"\\{1,8}u00(2[BDEFbdef]|3[0-9AaDd]|4[0-9A-Fa-f]|6[1-9A-Fa-f]|[57][0-9Aa]|5[Ff])")  # also escaped again: JSON in JSON
_SOLIDUS = lazy(r"\\{1,8}/")


def unescape_plain(text: str) -> str:
    """`text` with every JSON escape, and every HTML character reference, of a letter, digit or `_-.+/:=` written plainly
    (see _PLAIN_ESCAPE, _HTML_REFERENCE), and those of an invisible character dropped (see _HIDING_ESCAPE)."""
    return unescaped_counted(text)[0]


def unescaped_counted(text: str) -> tuple[str, int]:
    """unescape_plain(text), and how many escapes of an invisible character it dropped (counted as stripped)."""
    gone = [0]
    while "\\u" in text:
        new = text
        if "\\u00" in new:
            new = _PLAIN_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), new)
        new = _HIDING_ESCAPE.sub(lambda m: _hiding(m, gone), new)
        if new == text:
            break
        text = new
    if "\\/" in text:
        text = _SOLIDUS.sub("/", text)
    if "&#" in text or ("&" in text and ";" in text):
        text = _HTML_REFERENCE.sub(lambda m: _plain_reference(m, gone), text)
    if "%" in text:
        text = _PLAIN_PERCENT.sub(lambda m: chr(int(m.group(1), 16)), text)
    return text, gone[0]


# Forty-seventh round: a URL-encoded letter inside a name (`?pass%77ord=X`) hid the keyword, as a JSON escape did. No
# encoder writes a letter, a digit or `_` percent-encoded, so such an escape is decoded (and shown decoded); `%3D`, `%2F`,
# `%40` and the other reserved bytes keep their encoding (the URL-encoded patterns read them as they are).
_PLAIN_PERCENT = lazy(r"%(3[0-9]|4[1-9A-Fa-f]|5[0-9Aa]|5[Ff]|6[1-9A-Fa-f]|7[0-9Aa])")


# Thirtieth round: a JSON escape or an HTML character reference of an invisible character inside a token
# (`"hf_AbCdE\u200bfGh..."`, `ghp_A1b2C3&#8203;d4E5...`, `&ZeroWidthSpace;`): the character itself is stripped before
# redacting (safety/invisible.py), its escape hid the token from every pattern. Such an escape is dropped, and counted as
# stripped, like the character; one of a combining mark between two ASCII letters or digits (`ghp_A1b2C3\u0301d4...`) is
# decoded, and read as the marks written plainly are (_masked_as_read). C0 and C1 controls keep their escapes
# (`\u001b[31m` in a JSON log is a colour code, shown as written). A supplementary character comes as a surrogate pair.
_HIDING_ESCAPE = lazy(r"\\{1,8}u(?:([Dd][89ABab][0-9A-Fa-f]{2})\\{1,8}u([Dd][C-Fc-f][0-9A-Fa-f]{2})|([0-9A-Fa-f]{4}))")
_INVISIBLE_CHAR = lazy(f"[{INVISIBLE_CLASS}]")


def _hides(c: str) -> bool:
    """An invisible character whose escape is dropped (see _HIDING_ESCAPE): stripped as a character, not a control."""
    return ord(c) >= 0xA0 and _INVISIBLE_CHAR.match(c) is not None


def is_mark(c: str) -> bool:
    return unicodedata.category(c) in ("Mn", "Me")


def _between_ascii(m: re.Match[str]) -> bool:
    """Whether the match sits between two ASCII letters, digits or `_-` (where a mark can only split a token)."""
    s, a, b = m.string, m.start(), m.end()
    return 0 < a and b < len(s) and s[a - 1] in _TOKEN_CHARS and s[b] in _TOKEN_CHARS


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _hiding(m: re.Match[str], gone: list[int]) -> str:
    if m.group(3):
        code = int(m.group(3), 16)
        if 0xD800 <= code <= 0xDFFF:  # a lone surrogate: no character
            return m.group(0)
    else:
        code = 0x10000 + ((int(m.group(1), 16) - 0xD800) << 10) + (int(m.group(2), 16) - 0xDC00)
    c = chr(code)
    if _hides(c):
        gone[0] += 1
        return ""
    if is_mark(c) and _between_ascii(m):
        return c
    return m.group(0)


# The same characters written as HTML character references (`&#103;hp_...`, `password&#61;X`, `&#x67;`, `&equals;`), as a
# page or an HTML-escaping logger prints them: listed as kept by the fifteenth round, decoded since the sixteenth. Since
# the thirtieth a reference to an invisible character is dropped, and one to a combining mark between ASCII letters or
# digits decoded, as their JSON escapes are (_HIDING_ESCAPE). Since the seventy-fourth, as HTML5 and `html.unescape` read
# them: a numeric reference with no `;` (`&#103hp_`, `password&#61X`) and HTML5's names (`ghp&UnderBar;...`, `&it;`, `&af;`)
# were kept in clear.
_HTML_REFERENCE = lazy(r"&#(?:[xX]0{0,6}([0-9A-Fa-f]{1,6})|0{0,6}([0-9]{1,7}));?|&(commat|equals|colon|lowbar|UnderBar|period|sol|plus|hyphen|dash);"
                       r"|&(ZeroWidthSpace|NegativeVeryThinSpace|NegativeThinSpace|NegativeMediumSpace|NegativeThickSpace|zwnj|zwj"
                       r"|lrm|rlm|shy|NoBreak|InvisibleTimes|InvisibleComma|ApplyFunction|it|ic|af);")
_NAMED = {"commat": "@", "equals": "=", "colon": ":", "lowbar": "_", "UnderBar": "_", "period": ".", "sol": "/", "plus": "+", "hyphen": "-", "dash": "-"}


def _plain_reference(m: re.Match[str], gone: list[int] | None = None) -> str:
    if m.group(3):
        return _NAMED[m.group(3)]
    if m.group(4):  # a named invisible character
        if gone is not None:
            gone[0] += 1
        return ""
    code = int(m.group(1), 16) if m.group(1) else int(m.group(2))
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return m.group(0)
    c = chr(code)
    if code < 128:
        return c if c.isalnum() or c in "_-.+/:=@" else m.group(0)
    if _hides(c):
        if gone is not None:
            gone[0] += 1
        return ""
    return c if is_mark(c) and _between_ascii(m) else m.group(0)


def may_hide_escaped(text: str) -> bool:
    """Whether `text` holds a JSON escape or an HTML reference that unescaped_counted would drop or decode (redact.may_hide)."""
    return ("\\u" in text and _HIDING_ESCAPE.search(text) is not None) or ("&" in text and _HTML_REFERENCE.search(text) is not None)
