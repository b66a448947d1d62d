"""The catalog's signature patterns, exported for ripgrep (as written) and for grep -E (POSIX ERE).

Catalog patterns use the common Perl-style subset (\\d, \\s, \\w, (?i), (?:...)). ripgrep reads them
as they are; grep -E needs them rewritten: classes spelled out, (?i) expanded to [aA] pairs.
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.catalog.loader import signatures

_OUT = {"\\d": "[0-9]", "\\D": "[^0-9]", "\\s": "[[:space:]]", "\\S": "[^[:space:]]", "\\w": "[[:alnum:]_]", "\\W": "[^[:alnum:]_]"}
_IN = {"\\d": "0-9", "\\s": "[:space:]", "\\w": "[:alnum:]_"}


def to_ere(pattern: str) -> str:
    """Rewrite one catalog pattern as POSIX ERE with the same meaning on ASCII text."""
    fold = pattern.startswith("(?i)")
    p = pattern[4:] if fold else pattern
    out: list[str] = []
    i, in_class = 0, False
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            pair = p[i : i + 2]
            if in_class:
                out.append(_IN.get(pair, "\\\\" if pair == "\\\\" else pair[1]))
            else:
                out.append(_OUT.get(pair, pair))
            i += 2
            continue
        if in_class:
            if c == "]" and not out[-1].endswith(("[", "[^")):
                in_class = False
                out.append("]")
            else:
                out.append(c + c.swapcase() if fold and c.isascii() and c.isalpha() else c)
        elif c == "[":
            in_class = True
            out.append("[^" if p[i + 1 : i + 2] == "^" else "[")
            i += 2 if p[i + 1 : i + 2] == "^" else 1
            continue
        elif p.startswith("(?:", i):
            out.append("(")
            i += 3
            continue
        elif c in "*+?" and p[i + 1 : i + 2] == "?":  # lazy quantifiers: same lines match
            out.append(c)
            i += 2
            continue
        elif fold and c.isascii() and c.isalpha():
            out.append(f"[{c.lower()}{c.upper()}]")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def to_bytes_regex(pattern: str) -> str:
    """ripgrep's --no-unicode mode refuses non-ASCII literals: spell them as their UTF-8 bytes."""
    return "".join(c if c.isascii() else "".join(f"\\x{b:02X}" for b in c.encode()) for c in pattern)


def export(folder: Path) -> tuple[Path, Path]:
    """Write patterns.rg and patterns.ere (one pattern a line) into folder."""
    pats = [s.pattern for s in signatures()]
    rg, ere = folder / "patterns.rg", folder / "patterns.ere"
    rg.write_text("\n".join(to_bytes_regex(p) for p in pats) + "\n")
    ere.write_text("\n".join(to_ere(p) for p in pats) + "\n")
    return rg, ere
