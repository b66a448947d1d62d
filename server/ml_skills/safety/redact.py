"""Remove secrets from any text before it leaves the process, after removing what a reader cannot see.

Patterns are precompiled, with bounded quantifiers only, so a 1 MB line cannot make them
backtrack. Redaction is idempotent: the replacement never matches a pattern again. A result model
passes through `redact_value` when it is built, and the count of replacements is kept per context
(`redaction_count`) so results can report it.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import re
import threading
import unicodedata
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from ml_skills.lazyre import lazy
from ml_skills.modelkit import BaseModel
from ml_skills.safety.invisible import hidden_characters, strip_invisible, stripped_and_masked
from ml_skills.safety.secret_rules import KEYWORD, RANK_PREFIX, RULES
from ml_skills.safety.unescape import is_mark, may_hide_escaped, unescaped_counted

MASK = "[REDACTED]"

_count: ContextVar[int] = ContextVar("redactions", default=0)
_stripped: ContextVar[int] = ContextVar("stripped", default=0)


def _mask(match: re.Match[str]) -> str:
    whole, (a, b) = match.group(0), match.span("s")
    start = match.start(0)
    return whole[: a - start] + MASK + whole[b - start :]


MAX_PASSES = 4


def redact_counted(text: str) -> tuple[str, int]:
    """Return the text with every secret replaced by [REDACTED], and how many were replaced.

    Invisible characters and terminal escapes are stripped first (safety/invisible.py): a token split
    by a zero-width space or an ANSI colour code is joined again and caught; so is one split by the JSON escape or the HTML
    character reference of such a character (`\\u200b`, `&#8203;`), and a combining mark between two ASCII characters is
    read as absent (thirtieth round). What went is added to this context's `stripped_count`. A mask can expose a match another rule's earlier match had consumed (`"private_key":"7"private_key":"x`
    once a flag rule has masked the first key), so passes repeat until one replaces nothing: the
    result is a fixed point, and redacting it again changes nothing. Text without secrets costs one pass.
    """
    text, total, gone = _prepared(text)
    if gone:
        _stripped.set(_stripped.get() + gone)
    return _passes(text, total)


def _prepared(text: str) -> tuple[str, int, int]:
    """The text as the rules read it (stripped, unescaped, its ASCII reading's secrets masked), how many masked, and
    how many characters were stripped (for the caller to count)."""
    text, gone, masks = stripped_and_masked(text)
    text, dropped = unescaped_counted(text)
    text, n, marks = _masked_as_read(text)
    text, e = _masked_as_unescaped(text)
    return text, n + masks + e, gone + dropped + marks


def count_masks(n: int) -> None:
    """Add `n` masks made outside the rules (safety/invisible.strip_invisible's) to this context's redactions."""
    _count.set(_count.get() + n)


_WORD = lazy(r"[A-Za-z0-9_\-]+")


def _word_edge(words: list[tuple[int, int]], starts: list[int], i: int, otherwise: int, side: int) -> int:
    """The start (`side` 0) or end (1) of the word (letters, digits, `_`, `-`) holding index `i` of the text, or `otherwise`
    when no word holds it: how far a mask reaching `i` widens."""
    k = bisect.bisect_right(starts, i) - 1
    return words[k][side] if i >= 0 and k >= 0 and words[k][0] <= i < words[k][1] else otherwise


_BYTE_SHOWN = lazy(r"\\x[89a-f][0-9a-f]")  # a byte of a file name that is not UTF-8, as invisible._byte shows it


def _left_out(text: str, j: int) -> int:
    """How many characters at `j` of the shown text a joined reading leaves out (a U+FFFD, a `\\xff`), or 0."""
    return 1 if text[j] == "\ufffd" else 4 if _BYTE_SHOWN.match(text, j) else 0


def masked_as_joined(text: str, joined: str) -> tuple[str, int]:
    """`text` (stripped) with the secrets its joined reading holds masked (see invisible.joined_readings), and how many:
    called by safety/invisible, so every channel that strips before it redacts gets it.
    A joined reading is `text` with an escape's letters inserted where it sat, and its U+FFFD and bad bytes left out: the
    two are aligned by walking both, an unmatched character of the reading being one of those letters."""
    read, _n = settled(joined.replace(_FILL, "?"), fill=True)
    runs = [m.span() for m in re.finditer(_FILL + "+", read)]
    if not runs:
        return text, 0
    where: list[int] = []  # the index in `text` of each character of the reading, -1 for an inserted letter
    j = 0
    for c in joined:
        while j < len(text) and c != text[j] and (skip := _left_out(text, j)):  # a U+FFFD or a bad byte the reading left out
            j += skip
        if j < len(text) and c == text[j]:
            where.append(j)
            j += 1
        else:
            where.append(-1)
    own = settled(text.replace(_FILL, "?"), fill=True)[0]  # what the rules mask in the text shown, in place
    words = [m.span() for m in _WORD.finditer(text)]  # found once: widening each mask by walking was k masks x n (72nd round)
    starts = [a for a, _ in words]
    spans = []
    for a, b in runs:
        shown = [i for i in where[a:b] if i >= 0]
        if len(shown) == b - a and all(own[i] == _FILL for i in shown):
            continue  # the rules mask it in the text shown, in its own bounds: no wider mask (a file name's `run-` kept)
        if shown:  # widened to the whole word around it: a mask inside a token would split it for the rules that follow
            spans.append((_word_edge(words, starts, shown[0] - 1, shown[0], 0), _word_edge(words, starts, shown[-1] + 1, shown[-1] + 1, 1)))
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:  # overlapping or touching runs: one mask
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out: list[str] = []
    at = 0
    for a, b in merged:
        out += [text[at:a], MASK]
        at = b
    return "".join([*out, text[at:]]), len(merged)


def _passes(text: str, total: int, among: tuple[str, ...] | None = None) -> tuple[str, int]:
    """The rules' passes until one replaces nothing; the first looks only for the needles `among` (all when None)."""
    text, n = settled(text, among=among)
    return text, total + n


# Characters that read as an ASCII one, mapped to it one for one (offsets kept): fullwidth forms (`password：X`,
# `api_key＝X` in text typed with a CJK input method, `ｐａｓｓｗｏｒｄ`), the ideographic space and the other wide spaces
# (seventy-sixth round: `password<NBSP>X`, `hub_token<EM SPACE>X` kept X where a space did not), and the dashes a word
# processor or chat client puts in a pasted command (`--api‐key X`, `–token X`). Every rule is written in ASCII;
# before the ninth round each of these kept its secret. U+E000 (the fill character) is never taken for one.
READ_AS = {**{c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}, **{c: 0x20 for c in (0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000)}, **{c: 0x2D for c in (*range(0x2010, 0x2016), 0x2212, 0xFE58, 0xFE63)},
            0x2018: 0x27, 0x2019: 0x27, 0x201C: 0x22, 0x201D: 0x22, 0xE000: 0x3F}


def _letters_read_as_ascii() -> dict[int, int]:
    """Letters and signs a reader takes for ASCII ones (sixteenth round: `ᴘᴀꜱꜱᴡᴏʀᴅ=X`, `𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝=X`, `ⓟⓐⓢⓢⓦⓞⓡⓓ=X`,
    `passwоrd=X` with a Cyrillic о, `password﹕ X` with a small colon kept X in clear): each character of the blocks below
    whose compatibility form (NFKC) is one printable ASCII character, the small capitals (no compatibility form), and the
    Cyrillic and Greek letters drawn like a Latin one. Mapped one for one, like READ_AS: only the reading changes."""

    blocks = ((0x1D400, 0x1D800), (0x2460, 0x2500), (0x1F100, 0x1F1AE), (0xFE10, 0xFE20), (0xFE50, 0xFE70), (0x2070, 0x20A0),
              (0x1D2C, 0x1D6B), (0x2100, 0x2150), (0x2150, 0x2190), (0x02B0, 0x02E5), (0x2024, 0x2025))
    out = {}
    for a, b in blocks:
        for c in range(a, b):
            nf = unicodedata.normalize("NFKC", chr(c))
            if len(nf) == 1 and nf.isascii() and nf.isprintable() and nf != " ":
                out[c] = ord(nf)
    small = dict(zip("ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘꞯʀꜱᴛᴜᴠᴡʏᴢ", "abcdefghijklmnopqrstuvwyz", strict=True))
    cyrillic = dict(zip("аеорсухѕіјԁԛԝһАВЕКМНОРСТХЅІЈ", "aeopcyxsijdqwhABEKMHOPCTXSIJ", strict=True))
    greek = dict(zip("οανρικΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "oavpikABEZHIKMNOPTYX", strict=True))
    colons = dict.fromkeys("ː˸։׃܃܄᛬᠃᠉⁚∶꞉", ":")
    equals = dict.fromkeys("꞊᐀⹀゠", "=")
    out.update({ord(k): ord(v) for k, v in (*small.items(), *cyrillic.items(), *greek.items(), *colons.items(), *equals.items())})
    return out


READ_AS.update({c: a for c, a in _letters_read_as_ascii().items() if c not in READ_AS})


def _masked_as_read(text: str) -> tuple[str, int, int]:
    """`text` with the secrets its ASCII reading holds masked (see READ_AS), how many, and how many combining marks went
    inside the masks (see _MARK_RUN); ASCII text as it is."""
    if text.isascii():
        return text, 0, 0
    read = text.translate(READ_AS)
    gaps = [m.span() for m in _MARK_RUN.finditer(read) if all(map(is_mark, m.group(0)))]
    if not gaps and read == text.replace(_FILL, "?"):
        return text, 0, 0
    return _masked_through(text, read, gaps)


def _masked_through(text: str, read: str, gaps: list[tuple[int, int]]) -> tuple[str, int, int]:
    """`text` with the secrets masked that `read` (a reading of it, as long, each character standing for the one in the
    same place) holds once its `gaps` are dropped; how many, and how many gap characters went inside the masks."""
    # the reading without the gaps, and where each of its characters stands in `text` (one entry per gap: from the
    # reading's index where the gap was, add its width)
    at, shift = 0, 0
    cuts: list[int] = []
    shifts: list[int] = []
    parts: list[str] = []
    for a, b in gaps:
        parts.append(read[at:a])
        shift += b - a
        cuts.append(a - (shift - (b - a)))
        shifts.append(shift)
        at = b
    read = "".join([*parts, read[at:]])

    def where(i: int) -> int:  # the index in `text` of the reading's character i
        k = bisect.bisect_right(cuts, i)
        return i + (shifts[k - 1] if k else 0)

    read, _n = settled(read, fill=True)
    runs = [(where(m.start()), where(m.end() - 1) + 1) for m in re.finditer(_FILL + "+", read)]
    if not runs:
        return text, 0, 0
    out: list[str] = []
    at, marks = 0, 0
    for a, b in runs:
        out += [text[at:a], MASK]
        marks += sum(min(b, gb) - max(a, ga) for ga, gb in gaps if ga < b and gb > a)
        at = b
    return "".join([*out, text[at:]]), len(runs), marks


# Seventy-seventh round: a printed escape of a line break, a tab or a control before a name (`'host: h\npassword: X'` in a
# repr or a JSON string, http.client's `\r\nAuthorization: Basic X`, an environ dump's `\x00DB_PASSWORD=X`) and a colour
# code written as an escape around one (`\u001b[1mDB_PASSWORD\u001b[0m=X` in a docker json-file line, `\033[1m` in a repr)
# hid the name from every rule. They are shown as written; for matching, an escape of a line break or a tab reads as that
# character, one of another control as a space, and a colour code's escape as nothing.
_PRINTED_ESCAPE = lazy(r"\\{1,2}(?:(?:u001[bB]|x1[bB]|033|e)\[[0-9;]{0,16}[A-Za-z]|[nrt]|[fv0](?![0-7])|x[01][0-9A-Fa-f]"
                       r"|u00[01][0-9A-Fa-f]|0[0-3][0-7])")
_MEANS = {"n": "\n", "r": "\r", "t": "\t"}


def _masked_as_unescaped(text: str) -> tuple[str, int]:
    """`text` with the secrets masked that its reading with printed escapes read as what they stand for holds (see
    _PRINTED_ESCAPE), and how many."""
    if "\\" not in text:
        return text, 0
    read, gaps = ["?" if c == _FILL else c for c in text], []
    for m in _PRINTED_ESCAPE.finditer(text):
        a, b = m.span()
        body = m.group(0).lstrip("\\")
        if "[" in body:  # a colour code: nothing
            gaps.append((a, b))
        else:
            read[a] = _MEANS.get(body, " ")
            gaps.append((a + 1, b))
    if not gaps:
        return text, 0
    text, n, _inside = _masked_through(text, "".join(read), gaps)
    return text, n


# Thirtieth round: a combining mark (Unicode's Mn and Me) between two ASCII letters, digits or `_-` inside a token
# (`ghp_A1b2C3<U+0301>d4E5...`, no keyword near) kept it whole: no pattern matched across the mark. It is read as if absent,
# like the zero-width characters stripped before (safety/invisible.py), but only for matching: text written in decomposed
# form (`Re<U+0301>sume<U+0301>`, a macOS file name) is shown as it is; the marks inside a secret go with its mask, counted as
# stripped.
_MARK_RUN = lazy(r"(?<=[A-Za-z0-9_\-])[^\x00-\x7f]{1,16}(?=[A-Za-z0-9_\-])")


_FILL = "\ue000"  # a private-use character: masks a secret in place, keeping every offset (redact_after)


def _fill(match: re.Match[str]) -> str:
    whole, (a, b) = match.group(0), match.span("s")
    start = match.start(0)
    return whole[: a - start] + _FILL * (b - a) + whole[b - start :]


# The two keyword rules (cli-secret-flag, keyword-secret-assign) can only match where a keyword of KEYWORD ends
# its word, and their patterns are the dearest of all: a line of an ordinary log that holds the needle inside a word
# (`tokens/s`, `keyword`, `secrets_dir`) paid about 60 us for them. Every KEYWORD alternative ends in one of these
# words, followed by a character that is not a letter (`apikey` by anything): on ASCII text, where the rules' (?i)
# folds nothing but A-Z, a text with none of them cannot match either rule, so both are skipped. Other text (Unicode
# folds 'ſ' to s and 'ı' to i) always runs them.
_KEYWORD_ENDS = lazy(r"apikey|(?:key|token|secret|passw(?:or)?d|passphrase)(?![a-z])")
_KEYWORD_RULES = frozenset({"cli-secret-flag", "keyword-secret-assign", "named-value", "nested-value", "wandb-config-yaml",
                            "xml-secret-unclosed", "keyword-tuple", "xml-secret-value", "shell-set-secret"})
_NEEDLES = tuple(dict.fromkeys(n for _name, needles, _rx in RULES for n in needles))


def _no_keyword(text: str) -> bool:
    """True when neither keyword rule can match `text` (see _KEYWORD_ENDS); False when they must run."""
    return text.isascii() and _KEYWORD_ENDS.search(text.lower()) is None


@functools.lru_cache(maxsize=64)
def _rules_among(among: tuple[str, ...]) -> list[tuple[str, tuple[str, ...], re.Pattern[str]]]:
    """The rules that can run on a text holding no needle but these: the needle-less ones and those naming one."""
    return [r for r in RULES if not r[1] or not set(r[1]).isdisjoint(among)]


def _one_pass(text: str, fill: bool = False, among: tuple[str, ...] | None = None) -> tuple[str, int]:
    """One pass of every rule whose needles `text` holds; `among`: the only needles it can hold (redact_lines)."""
    return settled(text, fill, among, passes=1)


def settled(text: str, fill: bool = False, among: tuple[str, ...] | None = None, passes: int = MAX_PASSES) -> tuple[str, int]:
    """The rules' passes until one replaces nothing (at most `passes`), and how many they replaced; the first pass looks
    only for the needles `among` (all when None). A mask can expose a match another rule's earlier match had consumed, so
    passes repeat; but a rule runs again only if the text changed since it last ran (its own replacement counts: `sub`
    skips matches overlapping one it took). On the same text a rule finds the same nothing, so a line whose one rule masked
    80,000 argv flags costs that rule twice, not every rule twice (the quoted-argv line of tests/security/test_redact.py
    cost 5x ordinary text, and the clean-clone CI run of f8d816f0 failed on it)."""
    total, step, changed = 0, 0, -1
    ran: list[int | None] = [None] * len(RULES)  # the step at which each rule last ran
    for p in range(passes):
        replaced = 0
        lower = text.lower()  # redaction only removes needles ("[redacted]" holds none), so this stays a superset
        present = {n for n in (_NEEDLES if among is None or p else among) if n in lower}  # each needle looked for once
        no_keyword: bool | None = None  # judged on the text as the earlier rules left it, once a pass
        for i, (name, needles, rx) in enumerate(RULES):
            step += 1
            if needles and present.isdisjoint(needles):
                continue
            if (last := ran[i]) is not None and changed < last:
                continue  # the text is as this rule left it
            if name in _KEYWORD_RULES:
                if no_keyword is None:
                    no_keyword = _no_keyword(text)
                if no_keyword:
                    continue
            ran[i] = step
            text, found = _applied(rx, text, fill)
            if found:
                replaced, changed = replaced + found, step
        total += replaced
        if replaced == 0:
            break
    return text, total


def _applied(rx: re.Pattern[str], text: str, fill: bool) -> tuple[str, int]:
    """`rx`'s matches masked (or filled in place), skipping values already masked, and how many."""
    found = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal found
        s = m.group("s")
        if MASK[:-1] in s or _FILL in s or m.string.startswith(MASK, m.start("s")):  # already redacted (a mask cut by a value's end too)
            return m.group(0)
        found += 1
        return _fill(m) if fill else _mask(m)

    return rx.sub(sub, text), found


def redact_after(context: str, text: str) -> str:
    """Redact `text`, a piece of a line whose start was cut off, judged with the `context` that came before it.

    A byte cap that cuts a line can leave `AWS_SECRET_ACCESS_KEY=` in the part not shown and the value
    at the start of the part shown; no pattern sees a secret there. Redacting context and piece
    together, with secrets masked in place (offsets kept), then keeping only the piece, masks it.
    """
    ctx = strip_invisible(context.replace(_FILL, "?"))[0]
    piece, gone = strip_invisible(text.replace(_FILL, "?"))
    joined = ctx + piece
    joined, _n = settled(joined, fill=True)
    piece = joined[len(ctx):]
    runs = len(re.findall(_FILL + "+", piece))
    if runs:
        _count.set(_count.get() + runs)
        piece = re.sub(_FILL + "+", MASK, piece)
    if gone:
        _stripped.set(_stripped.get() + gone)
    return redact(piece)


def redact_named(name: str, value: str) -> str:
    """Redact a value shown apart from its name (a tracker's config entry, an MLflow param, a field of a dict), judged
    as `name: value`: a value under a secret-bearing name (`db_password`, `hub_token`) is masked as it would be on one
    line. Redacted alone, a plain password under such a name was shown as is (get_wandb_run's `config db_password`)."""
    if not value:
        return value
    return redact_after(f"{str(name)[-200:]}: ", value)


# A secret's name can sit on a line above its value (W&B config.yaml: the name, then `desc:`, then `value:`; a spec's
# `- name: HF_TOKEN` over `  value: X`). A view that starts at a line (a window, a grep block) judges its lines with the
# lines before them. Only the two rules above do that, and their value line holds this word.
PRIOR_LINES = 2


# Thirtieth round: an argv list pretty-printed one element a line (wandb-metadata.json's `"args"`): a quoted secret flag
# ending the line above (`"--hf_token",`) and its value, quoted, starting this one. Judged with the lines above like a
# `value:` line; may_hide says such a line may hide a secret (grep matches a pattern on it as shown).
_LIST_ELEMENT = lazy(r"[ \t]{0,40}+['\"]")


def _next_list_element(above: str, line: str) -> bool:
    return above.rstrip().endswith(("',", '",')) and _LIST_ELEMENT.match(line) is not None


# Fifty-third round: a secret's name ending the line above with a shell line continuation or a YAML block scalar
# (`--hub_token \`, `password: |-`), its value on this line (the rule "secret-continued").
_CONTINUES_A_SECRET = lazy(r"(?i)" + KEYWORD + r"['\"]?(?:[ \t]{1,3}+\\|[ \t]{0,3}+[:=][ \t]{0,3}+(?:\\|[|>][+\-]?[0-9]?))[ \t]{0,3}+\r?$")


def named_above(prior: list[str], line: str) -> bool:
    """Whether `line` may be a value whose secret's name sits on a line above it: a `value:` line, the next element of an
    argv list printed one a line, or the line after a secret's name ended with a continuation or a block scalar."""
    return bool(prior) and ("value" in line.lower() or _next_list_element(prior[-1], line)
                            or _CONTINUES_A_SECRET.search(prior[-1][-300:]) is not None)


def redact_line_after(prior: list[str], line: str, *, count: bool = True) -> str:
    """One line as shown when the lines before it may not be (each line of an excerpt is shown on its own, behind a
    line number): a value whose name sits on a line above is masked, judged with up to PRIOR_LINES lines before it.
    A line that cannot be such a value comes back unchanged: the channel redacts it as every line.
    `count=False` counts nothing (as_shown): for matching a caller's pattern against what the caller may see."""
    if not named_above(prior, line):
        return line
    ctx = "\n".join(prior[-PRIOR_LINES:]) + "\n"
    saved = _count.get(), _stripped.get()
    out = redact_after(ctx, line)
    masked = _count.get() > saved[0]
    if not (masked and count):
        _count.set(saved[0])
        _stripped.set(saved[1])
    return out if masked else line  # nothing masked: the line as it was (the channel strips and redacts it as every line)


def may_hide(text: str) -> bool:
    """Whether redacting `text` could change it: a rule's needle or a needle-less rule's shape, a character stripped, a
    JSON escape, a form read as ASCII. False: the text is shown as it is, so a caller's pattern may be matched on it raw.
    What it costs does not depend on anything a caller guesses (see mcp_tools/logs._ShownLines)."""
    if may_hide_escaped(text) or hidden_characters(text) or "\ufffd" in text:
        return True
    if _LIST_ELEMENT.match(text):  # the value of a secret flag on the line above (redact_line_after)
        return True
    read = text if text.isascii() else text.translate(READ_AS)  # a progress bar's blocks change nothing: judged like ASCII
    if not read.isascii() and any(all(map(is_mark, m.group(0))) for m in _MARK_RUN.finditer(read)):
        return True  # a combining mark between ASCII letters or digits, read as absent
    if not _needle_or_shape(read):  # most lines of a log: one scan in C
        return False
    lower = read.lower()
    present = {n for n in _NEEDLES if n in lower}
    for name, needles, rx in RULES:  # the gates of _one_pass: a rule that would not run cannot mask anything
        if needles and present.isdisjoint(needles):
            continue
        if name in _KEYWORD_RULES and _no_keyword(read):
            continue
        if needles or rx.search(read):
            return True
    return False


_NEEDLE_SCAN: list[Any] = []  # [hyperscan database] once built, [None] without hyperscan
_SCRATCH = threading.local()  # a scratch is one scan's working memory: one per thread


def _scratch() -> Any:
    import hyperscan

    if getattr(_SCRATCH, "s", None) is None:
        _SCRATCH.s = hyperscan.Scratch(_NEEDLE_SCAN[0])
    return _SCRATCH.s


def _needle_or_shape(text: str) -> bool:
    """Whether `text` holds any rule's needle, or could be a needle-less rule's line (a PEM body line): a superset of
    what _one_pass can mask, found by one Hyperscan scan where the binding is installed (grep_log asks it of every line)."""
    if not _NEEDLE_SCAN:
        _NEEDLE_SCAN.extend(_needle_database())
    db = _NEEDLE_SCAN[0]
    if db is None:
        lower = text.lower()
        return any(n in lower for n in _NEEDLES) or any(rx.search(text) for _name, needles, rx in RULES if not needles)
    import hyperscan

    try:
        # lowered first when not ASCII: str.lower() is what _one_pass looks for needles in (U+212A KELVIN SIGN is a 'k')
        data = text if text.isascii() else text.lower()
        db.scan(data.encode("utf-8", errors="replace"), match_event_handler=lambda *_: True, scratch=_scratch())
    except hyperscan.ScanTerminated:  # the handler stops the scan at the first match
        return True
    return False


def _needle_database() -> list[Any]:
    """The needles (ids 0..len(_NEEDLES)-1, caseless) and pem-body-line's shape (the last id), compiled once and kept
    in the cache directory as the engine's databases are (dbcache.py): compiling it took 23-30 ms of every run."""
    try:
        import hyperscan
    except ImportError:  # pragma: no cover - platforms without a wheel
        return [None]
    from ml_skills import dbcache

    exprs = [re.escape(n).encode() for n in _NEEDLES]
    exprs.append(rb"^[\s'\">]{0,8}" + RANK_PREFIX.encode() + rb"(?:\d{1,12}\s{0,4}[:|]\s{0,4})?[A-Za-z0-9+/]{24,76}")  # pem-body-line's shape, loosely
    flags = [hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_SINGLEMATCH] * len(_NEEDLES) + [hyperscan.HS_FLAG_SINGLEMATCH]
    return [dbcache.compiled(hyperscan, exprs, list(range(len(exprs))), flags, hyperscan.HS_MODE_BLOCK)]


def _needles_in(lowered: str) -> tuple[str, ...]:
    """`tuple(n for n in _NEEDLES if n in lowered)`, for a text already lowered: one Hyperscan scan of it where the
    binding is installed (0.2 ms for a report's batch of head and tail lines, against 8 ms for 88 `in` searches).
    Exact: every needle is lowercase ASCII, so in UTF-8 it matches only where the text holds it, and a lowered text
    holds no ASCII capital for the caseless flag to fold."""
    if not lowered:
        return ()
    if not _NEEDLE_SCAN:
        _NEEDLE_SCAN.extend(_needle_database())
    db = _NEEDLE_SCAN[0]
    if db is None:
        return tuple(n for n in _NEEDLES if n in lowered)
    found: set[int] = set()

    def on_match(idx: int, _from: int, _to: int, _flags: int, _ctx: object) -> bool:
        found.add(idx)
        return False

    db.scan(lowered.encode("utf-8", errors="surrogatepass"), match_event_handler=on_match, scratch=_scratch())
    return tuple(_NEEDLES[i] for i in sorted(found) if i < len(_NEEDLES))


def redact(text: str) -> str:
    """Redact secrets and add the number replaced to this context's count."""
    if not text:
        return text
    memo = _memo.get()
    done = memo.get(text) if memo is not None else None
    if done is None:
        clean, total, gone = _prepared(text)
        done = (*_passes(clean, total), gone)
        if memo is not None and len(memo) < MEMO_SIZE:
            memo[text] = done
    return _counted(text, done)


def _counted(text: str, done: tuple[str, int, int]) -> str:
    """What redact() returns for `text` redacted as `done` (the text, masks, characters stripped), counted."""
    new, n, gone = done
    if gone:
        _stripped.set(_stripped.get() + gone)
    if new == text:
        return text
    _count.set(_count.get() + n)
    return new


PAST_CUT = 16 * 1024


def redact_cut(text: str, n: int) -> str:
    """The first `n` characters of `text` as shown: redacted, then cut. Cut first, a token or a URL's password crossing the
    cut is no pattern's match and its first part is shown (twentieth round: a traceback message cut at 500 showed
    `ghp_Ab1Cd2E`, the last progress line cut at 300 a password's first characters). What follows the cut is judged up to
    16 KiB, as a read cap's cut is."""
    return redact(text[: n + PAST_CUT])[:n]


def redact_lines(lines: list[str]) -> list[str]:
    """`[redact(x) for x in lines]` for consecutive lines of a log, with the rules' needles looked for once in the whole
    batch, and each line judged with the lines above it too (redact_line_after: fifty-third round, a value below its name).

    Looking for all 87 needles in each of a report's 800-1100 head, tail and excerpt lines was 10 ms of a 10 MiB run; a
    batch of log lines holds few of them (2 in the benchmark log's), and a needle a line holds is in the batch's
    joined text, so each line's first pass looks only for those. Later passes (after a mask) look for all.
    """
    memo = _memo.get()
    if memo is None:
        memo = {}  # this batch's repeated lines redacted once (and counted for each)
    fresh = {x: _prepared(x) for x in lines if x and x not in memo}
    among = _needles_in("\n".join(clean.lower() for clean, _, _ in fresh.values()))
    over: dict[str, tuple[str, int, int]] = {}  # past the memo's cap: kept for this call only
    for x, (clean, total, gone) in fresh.items():
        (memo if len(memo) < MEMO_SIZE else over)[x] = (*_passes(clean, total, among), gone)
    out = [_counted(x, over[x] if x in over else memo[x]) if x else x for x in lines]
    for i, x in enumerate(lines):  # a value whose secret's name ends a line above (the lines are a run of the log's)
        if i and x and (judged := redact_line_after(lines[max(0, i - PRIOR_LINES) : i], x, count=False)) not in (x, out[i]):
            # counted as the masks it adds to the line's own: a line holding its own secret below a list element was
            # counted twice (tests/security/test_redact_lines.py, when the planted key's random body drew such a pair)
            _count.set(_count.get() + max(1, judged.count(MASK) - out[i].count(MASK)))
            out[i] = judged
    return out


MEMO_SIZE = 65536  # texts remembered under remembered(), at most
_memo: ContextVar[dict[str, tuple[str, int, int]] | None] = ContextVar("redaction_memo", default=None)


@contextlib.contextmanager
def remembered() -> Iterator[None]:
    """Within this block (this thread or task), each distinct text is redacted once and its result replayed, counts
    included: the CLI redacts its report's lines while diagnosing, then the whole report before writing it and again as
    the file is written (the last guards), about 190 texts each, 3 ms a walk, most of them texts already redacted.
    Redaction is a function of the text alone, so a replayed result is the one computing it again gives. Only for a
    process that ends with its diagnosis: the memo holds the texts (the log's lines) until the block ends."""
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


def as_shown(text: str) -> str:
    """The text as every output channel shows it (stripped, redacted), without counting anything:
    for matching a caller's pattern against what the caller may see, never against the raw secret."""
    count, stripped = _count.get(), _stripped.get()
    try:
        return redact_counted(text)[0]
    finally:
        _count.set(count)
        _stripped.set(stripped)


def redaction_count() -> int:
    return _count.get()


def reset_redaction_count() -> None:
    _count.set(0)


def stripped_count() -> int:
    """Invisible characters and escape-sequence characters removed by redaction in this context."""
    return _stripped.get()


def reset_stripped_count() -> None:
    _stripped.set(0)



# The MCP SDK's sealed request state (an approval's round trip on the 2026-07-28 protocol): authenticated ciphertext the
# server minted, opaque to the client and holding nothing readable. Redacting it only breaks the round trip: about 3 in
# 10,000 tokens hold 'hf_' and 34 letters or digits by chance (a Hugging Face token's shape), and the approval came back
# "Invalid or expired requestState" (a clean-clone CI run, 2026-12-05). Only the field of an `input_required` result
# itself, the value redact_value was handed (the SDK's model, or its wire mapping with `resultType`), is passed: a key of
# that name anywhere inside a result is data like any other (twenty-sixth round: a report planted in a run folder with a
# `request_state` key handed `read_report`'s structured content a Hugging Face token in clear).
SEALED_FIELDS = frozenset({"request_state", "requestState"})


def _input_required(value: Any) -> bool:
    """An `input_required` interim result, typed or wire-shaped (the SDK's own test, without importing the SDK)."""
    if isinstance(value, dict):
        return value.get("resultType") == "input_required"
    return isinstance(value, BaseModel) and getattr(value, "result_type", None) == "input_required"


def redact_value(value: Any) -> Any:
    """Redact every string inside a pydantic model, list, tuple or dict (keys too), counting in this context.

    The last guard before a result leaves: paths, sources and targets are redacted as well as log
    text, since a token can sit in a directory name. Unchanged parts keep their identity and type
    (an enum stays an enum); models are copied, never mutated. The one field left as it is: the sealed state of an
    `input_required` result handed here whole (SEALED_FIELDS), never a field of that name inside another value.
    """
    if not _input_required(value):
        return _redact_any(value)
    if isinstance(value, dict):
        pairs = [(k, v) if k in SEALED_FIELDS else (_redact_any(k), _redact_item(k, v)) for k, v in value.items()]
        same = all(k2 is k and v2 is v for (k2, v2), (k, v) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return _redact_model(value, skip=SEALED_FIELDS)


def _redact_model(value: BaseModel, skip: frozenset[str] = frozenset()) -> BaseModel:
    """A model's fields redacted (a path field as a path), but those named in `skip`; copied only when one changed."""
    update = {}
    for name in type(value).model_fields:
        if name in skip:
            continue
        old = getattr(value, name)
        new = _redact_path(old) if name in PATH_FIELDS and isinstance(old, str) else _redact_any(old)
        if new is not old:
            update[name] = new
    return value.model_copy(update=update) if update else value


def _redact_any(value: Any) -> Any:
    """redact_value for any value inside a result: every string, with no field left out."""
    if isinstance(value, str):
        new = redact(value)
        return value if new == value else new
    if isinstance(value, BaseModel):
        return _redact_model(value)
    if isinstance(value, (list, tuple)):
        items = [_redact_any(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
    if isinstance(value, dict):
        pairs = [(_redact_any(k), _redact_item(k, v)) for k, v in value.items()]
        same = all(k2 is k and v2 is v for (k2, v2), (k, v) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return value


def _redact_item(key: Any, value: Any) -> Any:
    """A dict's value, judged with its key when the key names a secret (`{"db_password": "X"}`: X alone is no pattern's)."""
    if isinstance(key, str) and isinstance(value, str) and _KEYWORD_ENDS.search(key.lower()):
        new = redact_named(key, value)
        return value if new == value else new
    if key in PATH_FIELDS and isinstance(value, str):
        return _redact_path(value)
    return _redact_any(value)


# Fields of a result that hold a path the server resolved or was given (a checkpoint's `path`, an inventory's `root`, an
# answer's `target`), never a line of a printed key. Before the fourteenth round such a field holding only a folder of 24
# to 76 base64 characters with upper and lower case and a digit (`/data/runs/GPT2/exp1`) was masked whole as a PEM key's
# body line: `list_artifacts` answered `"path": "[REDACTED]"`. An absolute path is redacted here as it stands inside a
# line (the approval question's rule since the thirteenth round, `redact_in_line`): every other rule still applies.
PATH_FIELDS = frozenset({"path", "root", "source", "target", "report_path", "pointer_file", "out_dir", "newest_valid_checkpoint",
                         "command_file", "checkpoint"})


def redact_in_line(text: str) -> str:
    """`text` redacted as it stands inside a line, not as a line of its own: a word after it ends a whole-line rule's match
    (pem-body-line), and is taken off again; when a mask swallowed it (`/data/--api-key x`), the text is redacted alone. Never
    less masked than the text alone, but for that rule. Only for an absolute path; any other text is redacted as it is."""
    if not text.startswith("/"):
        return redact(text)
    joined = redact(text + " x")
    return joined.removesuffix(" x") if joined.endswith(" x") else redact(text)


def _redact_path(value: str) -> str:
    new = redact_in_line(value)
    return value if new == value else new
