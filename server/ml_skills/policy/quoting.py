"""How the approval question quotes what it shows: untrusted text (a command line, a path, a pointer's content) as one
line, and each character outside ASCII named with its code.

Kept apart from `policy/actions.py` (which prepares and runs each action) because every action's question and the
recorded command's checks share these rules: what the person reads must be what runs, so the same function decides
which characters a reader can take for others, for the question and for the refusal of a recorded line.
"""

from __future__ import annotations

import unicodedata

from ml_skills.errors import PolicyError
from ml_skills.safety.quoting import strip_invisible
from ml_skills.safety.redact import MASK, redact_in_line
from ml_skills.safety.unescape import unescape_plain

_ESCAPE = {"\n": "\\n", "\t": "\\t"}


# Modifier letters that only extend a word of their own script (kana's long vowel mark, CJK iteration marks).
_WORD_MODIFIERS = frozenset("\u3005\u3031\u3032\u3033\u3034\u3035\u309d\u309e\u30fc\u30fd\u30fe\uff70\uff9e\uff9f")
# Latin click letters: `ǀ ǁ ǂ ǃ` read as `| || ‡ !`.
_CLICKS = frozenset("\u01c0\u01c1\u01c2\u01c3")


def looks_like_another(c: str) -> bool:
    """A character a reader can take for another one, outside ASCII. A symbol can be blank (U+2800 BRAILLE PATTERN BLANK
    reads as a space, so `train.py<U+2800>--lr` reads as two words) or look like punctuation (U+2215 DIVISION SLASH for
    '/', U+FF0E FULLWIDTH FULL STOP for '.'). So can a modifier letter (U+A4F8 LISU LETTER TONE MYA TI reads as '.',
    U+02BC as an apostrophe, U+A4FD as ':'), a click letter (U+01C3 as '!'), a digit of another script (U+0660
    ARABIC-INDIC DIGIT ZERO is a dot) and an enclosing mark (it draws a shape over the character before it): before the
    ninth round `python train<U+A4F8>py` read as `python train.py`. Letters of words (résumé, データ) and combining
    accents are names people use and stay."""
    if c.isascii():
        return False
    cat = unicodedata.category(c)
    if cat == "Lm":
        return c not in _WORD_MODIFIERS
    return cat[0] not in "LM" or cat == "Me" or c in _CLICKS


QUOTED_LIMIT = 500
MAX_NAMED = 40  # characters outside ASCII one question names; a question that would hold more is refused, never cut


# Combining marks one character carries, in a row. A name needs few (Vietnamese written decomposed: two; Tibetan's stacked
# letters: three or four); a run of a hundred (`run` + U+0346 x 60 + U+0336 x 60, "Zalgo" text) is drawn as a tower above
# and below its line, over the question's Action and Risk lines, and was asked as is before the fourteenth round.
MAX_MARKS_IN_A_ROW = 4


def _stacked(word: str) -> bool:
    """Whether `word` puts more than MAX_MARKS_IN_A_ROW combining marks (Mn, Me) in a row on one character."""
    run = 0
    for c in word:
        run = run + 1 if not c.isascii() and unicodedata.category(c) in ("Mn", "Me") else 0
        if run > MAX_MARKS_IN_A_ROW:
            return True
    return False


def named_outside_ascii(*parts: str) -> str:
    """Each character outside ASCII in a command or path the person approves, named with its code, once, after the word
    that holds it: ` (characters outside ASCII: U+A78F LATIN LETTER SINOLOGICAL DOT in "train꞉py")`. A letter can read as
    punctuation (U+A78F and U+1427 CANADIAN SYLLABICS FINAL MIDDLE DOT as a dot between `train` and `py`) and a combining
    mark as nothing (U+0323 COMBINING DOT BELOW: `train.pỵ`); both are letters of names people use, so they are shown,
    and named, so the person reads `train.py` only when it is train.py (eleventh round: the question read as the
    ordinary launch and the look-alike file ran). Every one is named, in every word that holds it: before the twelfth
    round the first 8 were, then "and 1 more", and a run folder named with eight accented letters
    (`expériences_données_çàüöñøß`) left the look-alike dot in `python train꞉py` unnamed; it ran after an accept. Over
    MAX_NAMED, the action is refused. `parts` are a folder, a command, paths: a path the question would mask is refused
    before (see masked), since a word quoted alone has lost the name beside it (before the thirteenth round a run folder
    named `run --password Sécret1` was shown masked in the question while its second word, named for its `é`, showed the
    password), and a command is given here as shown, redacted."""
    if any(_stacked(part) for part in parts):
        raise PolicyError(f"the action's paths and command stack more than {MAX_MARKS_IN_A_ROW} combining marks on one character: "
                          "drawn above and below their line, they can cover the question's other lines; do it yourself")
    by_word: dict[str, list[str]] = {}  # each word's own: a folder holding U+A78F must not leave it unnamed in `train꞉py`
    for word in dict.fromkeys(w for part in parts for w in part.split()):
        if chars := list(dict.fromkeys(c for c in word if not c.isascii())):
            by_word[word] = chars
    count = sum(len(cs) for cs in by_word.values())
    if not count:
        return ""
    if count > MAX_NAMED:
        raise PolicyError(f"the action's paths and command hold {count} characters outside ASCII: more than the question can "
                          f"name ({MAX_NAMED}), and a letter among them can read as punctuation; do it yourself")
    named = [", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in cs) + f" in {quoted(w, 80)}" for w, cs in by_word.items()]
    return f" (characters outside ASCII: {'; '.join(named)})"


def in_line(text: str) -> str:
    """`text` redacted as it stands inside a line of the question, not as a line of its own. A rule for a whole line (a PEM
    key's body line: 24 to 76 base64 characters, `/` among them) took a folder such as `/data/runs/GPT2/exp1` for a key
    line, and before the thirteenth round the restart question read `in "[REDACTED]"`: the person approved a folder they
    could not see. A word after it ends the line's match; it is taken off again unless a mask swallowed it (never less
    masked than the text alone, but for that rule). Only for an absolute path: other quoted text (a pointer's old content)
    is redacted as a line of its own (`safety/redact.redact_in_line`, which result fields holding a path share)."""
    return redact_in_line(text)


def masked(text: str) -> bool:
    """Whether the question would show part of `text` (a folder, a path, a pointer's new content) as [REDACTED]. The person
    would approve a place they cannot see whole: two run folders `exp --token good` and `exp --token evil` read the same, and
    before the thirteenth round either was restarted from one question."""
    return in_line(text).count(MASK) > text.count(MASK)


def decoded(text: str) -> bool:
    """Whether the question would show `text` with an escape decoded: redaction reads a JSON escape or an HTML character
    reference of a letter, digit or `_-.+/:=` as that character (`\\u0061`, `&#97;`) and drops one of an invisible
    character (`\\u200b`, `&#8203;`; thirtieth round), so `python 'tr\\u0061in.py'` read as
    `python 'train.py'` and ran the file named `tr\\u0061in.py` after an accept (sixteenth round; decoded since the eighth)."""
    return unescape_plain(text) != text


def quoted(text: str, limit: int = QUOTED_LIMIT) -> str:
    """Untrusted text (a command line, a path) as one quoted line: escapes and invisible characters
    gone, line breaks and other controls shown as escapes, so it cannot start a line of its own; a
    character that reads as another one (looks_like_another) shown as its code (`\\u2800`). Redacted before it is cut: a
    URL's password cut before its `@host`, or a token cut short, no longer matches a pattern (twelfth round). Combining
    marks past MAX_MARKS_IN_A_ROW on one character are shown as codes too: a process's command line (kill-worker's question)
    stacking a hundred of them is drawn over the question's other lines (fourteenth round)."""
    text, _ = strip_invisible(in_line(text))
    out, run = [], 0
    for c in text.replace("\\", "\\\\").replace('"', '\\"'):
        run = run + 1 if not c.isascii() and unicodedata.category(c) == "Mn" else 0
        shown = c.isprintable() and not looks_like_another(c) and run <= MAX_MARKS_IN_A_ROW
        out.append(c if shown else _ESCAPE.get(c, f"\\u{ord(c):04x}"))
    text = "".join(out)
    return '"' + (text if len(text) <= limit else text[:limit] + "...") + '"'
