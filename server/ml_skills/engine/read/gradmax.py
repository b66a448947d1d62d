"""The largest grad norm of a sampled log, exactly, without parsing every line.

A spike is one line; sampling parses about 2048 lines of a big log and can step over it. After
each chunk's sampled lines are parsed, the chunk is scanned once more (in memory) for grad norms
at or above the largest value seen so far, rounded down to two significant digits (never below
1.0: a spike is at least 1.0 by the detector's own rule). Whatever the log's maximum is, the chunk
that holds its first occurrence reports it: every earlier value, and the threshold, is below or
equal to it. The threshold rises with the record, so a log reports a few hundred lines in all.

This replaced 24 magnitude bands matched on every line (each chunk's top band said which chunks
to read again after the pass). Matching costs about the same (every training line carries a grad
norm, so the key fires on each line either way), but the log is read once, the per-chunk work is
one small pattern, and no band can make the answer depend on which chunks were read again.

The key is first matched loosely (`norm:` and what follows, not the name before it), which halves
the cost at levels below 10; a chunk where other norms crowd the reports is read again with the
exact key, so the answer is the same either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

from ml_skills.engine.read.matcher import Matcher, ScanLimit
from ml_skills.lazyre import lazy

KEY = r"(?i)\b(grad(ient)?[_ ]?norm|gnorm|total_norm|global_norm)['\"]?\s*[:=]\s*\[?['\"]?(tensor\()?"
# The same key without the names before `norm`: checking them for every `norm` of every line costs
# Hyperscan as much again as the number after it. It also matches other norms (`params norm:
# 250.1`); their lines give no grad-norm value when parsed, and a chunk they crowd is scanned again
# with KEY.
LOOSE_KEY = r"(?i)norm['\"]?\s*[:=]\s*\[?['\"]?(tensor\()?"
VALUE = lazy(rb"(?i)(?:grad(?:ient)?[_ ]?norm|gnorm|total_norm|global_norm)['\"]?[ \t]*[:=][ \t]*\[?['\"]?(?:tensor\()?([0-9][0-9.]*(?:[eE][-+]?[0-9]+)?)")
MAX_K = 8  # levels stop at 9.9e8: above that every value is reported (and parsed)
FLOOR = 1.0  # the grad-spike detector ignores maxima below 1.0
REPORTS_PER_SCAN = 512  # more than this in one chunk: raise the threshold to their maximum and scan the chunk again

Level = tuple[int, int, int]  # (k, d1, d2): the value d1.d2 * 10**k, d1 in 1..9, k >= 0


def level_at_most(v: float) -> Level:
    """The largest two-significant-digit level <= v, at least FLOOR (exact in decimal, as the regex reads it)."""
    if not v >= FLOOR:  # also NaN
        return 0, 1, 0
    if v == float("inf"):  # a value too long for a float ('1e999'): every level is below it
        return MAX_K, 9, 9
    k = 0
    while k < MAX_K and v >= 10.0 ** (k + 1):
        k += 1
    scaled = min(99, int(v / 10.0**k * 10))
    exact = Fraction(v)
    while scaled > 10 and Fraction(scaled) * Fraction(10) ** (k - 1) > exact:
        scaled -= 1
    return k, scaled // 10, scaled % 10


def level_value(level: Level) -> float:
    k, d1, d2 = level
    return (d1 + d2 / 10) * 10.0**k


def _digit_above(d: int) -> str | None:
    return None if d >= 9 else (str(d + 1) if d == 8 else f"[{d + 1}-9]")


def _digit_from(d: int) -> str:
    return str(d) if d == 9 else f"[{d}-9]"


# A number in exponent form with a positive exponent ("3.1e+04", "2E5"): the only way a value is
# written at or above 10 without two integer digits. Two gates, because `[eE]\+?` alone (no
# literal to anchor on) costs Hyperscan four times as much as either.
GATE_SIGNED = r"[eE]\+0*[1-9]"
GATE_BARE = r"[\d.][eE]0*[1-9]"


def at_least(level: Level, key: str = KEY) -> list[tuple[str, str | None]]:
    """Regexes (each with its gate, or None) that together match a grad-norm key followed by a number >= the level.

    They may also match a few smaller numbers (an unnormalised exponent like `12e0`): every report
    is parsed and compared, so only a missed number could be wrong, never an extra one.

    Above level 10 (k >= 1) the exponent forms are split off behind gates: reading every number
    after every key to its end in search of an `e` is what costs, and in a log with no
    positive exponent the gates never fire, so only the plain forms are scanned (about a third of
    the cost). At levels below 10 the exponent `e+00` is common (Megatron writes every loss so),
    so gating would not pay and one pattern is used.
    """
    k, d1, d2 = level
    end = r"([^\d.eE]|[eE]([^\d+-]|$)|$)"  # a plain decimal ends here; an exponent form is handled below
    tail = r"(\.\d*)?" + end
    plain = [rf"[1-9]\d{{{k + 1},}}"]  # more integer digits than the level
    above = _digit_above(d1)
    if above:
        plain.append(above + (rf"\d{{{k}}}" if k else "") + tail)
    if k:
        plain.append(str(d1) + _digit_from(d2) + (rf"\d{{{k - 1}}}" if k > 1 else "") + tail)
    elif d2:
        plain.append(rf"{d1}\.{_digit_from(d2)}\d*" + end)
    else:
        plain.append(rf"{d1}{tail}")
    # normalised exponent forms m.mmm e+E: above when E > k, or E == k and the mantissa >= d1.d2
    bigger_exp = rf"([{k + 1}-9]|[1-9]\d+)" if k < 8 else r"(9|[1-9]\d+)"
    exp = [rf"[1-9](\.\d*)?[eE]SIGN0*{bigger_exp}"]
    if above:
        exp.append(rf"{above}(\.\d*)?[eE]SIGN0*{k}")
    exp.append((rf"{d1}\.{_digit_from(d2)}\d*" if d2 else rf"{d1}(\.\d*)?") + rf"[eE]SIGN0*{k}")
    if not k:
        exp.append(r"(0|[1-9]\d+)(\.\d*)?[eE]\+?0*\d+")  # unnormalised (0.5e+03, 12e1): report, parse, compare
        return [(key + "0*(" + "|".join(plain + [e.replace("SIGN", r"\+?") for e in exp]) + ")", None)]
    # k >= 1: an unnormalised mantissa reaches 10**k with a positive exponent (gated below) or with
    # at least k+1 integer digits (any exponent)
    plain_and_long = key + "(0*(" + "|".join(plain) + rf")|[1-9]\d{{{k},}}(\.\d*)?[eE][-+]?\d)"
    exp += [r"0[\d.]*[eE]SIGN0*[1-9]", r"[1-9]\d+(\.\d*)?[eE]SIGN0*[1-9]"]
    gated = key + "(" + "|".join(exp) + ")"
    return [(plain_and_long, None), (gated.replace("SIGN", r"\+"), GATE_SIGNED), (gated.replace("SIGN", ""), GATE_BARE)]


@cache
def _matcher(level: Level, engine: str | None, loose: bool = False) -> Matcher:
    pats = at_least(level, LOOSE_KEY if loose else KEY)
    return Matcher([p for p, _ in pats], gates=[g for _, g in pats], engine=engine)


@dataclass
class Record:
    """The largest grad norm so far: its value, byte offset in the log, and the line's raw bytes."""

    value: float
    offset: int
    raw: bytes | None = None  # set when the record came from a scan report, not a parsed sample


def _value_in(line: bytes) -> float | None:
    best = None
    for m in VALUE.finditer(line):
        try:
            v = float(m.group(1))
        except ValueError:
            continue
        if not math.isnan(v) and (best is None or v > best):
            best = v
    return best


def _largest(chunk: bytes | bytearray, ends: list[tuple[int, int]]) -> tuple[float, int, int] | None:
    """(value, line start, line end) of the largest reported grad norm; the first line holding it."""
    best: tuple[float, int, int] | None = None
    stop = -1
    for _, end in ends:  # sorted by end: a line's reports are consecutive, and its bounds are found once
        if max(0, end - 1) <= stop:
            continue  # the line already read (searching back to its start per report was quadratic in its length)
        start = chunk.rfind(b"\n", 0, max(0, end - 1)) + 1
        stop = chunk.find(b"\n", max(0, end - 1))
        stop = len(chunk) if stop < 0 else stop
        v = _value_in(bytes(chunk[start:stop]))
        if v is not None and (best is None or v > best[0]):
            best = (v, start, stop)
    return best


def scan_chunk(chunk: bytes | bytearray, offset: int, record: Record | None, engine: str | None) -> Record | None:
    """The record, raised to this chunk's largest grad norm if that is larger (on a tie the earlier line wins)."""
    level = level_at_most(record.value if record is not None else FLOOR)
    limit: int | None = REPORTS_PER_SCAN
    loose = True
    while True:
        try:
            ends, capped = _matcher(level, engine, loose).find(chunk, limit=limit), False
        except ScanLimit as e:
            ends, capped = e.found, True
        best = _largest(chunk, ends)
        if not capped:
            break
        higher = level_at_most(best[0]) if best is not None else level
        if higher > level:
            level = higher  # many values above the record: look again above the largest of them
        elif loose:
            loose = False  # other norms fill the reports: match the grad-norm keys exactly
        else:
            limit = None  # they crowd one level: take every report
    if best is None:
        return record
    v, start, stop = best
    if record is not None and (v < record.value or (v == record.value and record.offset <= offset + start)):
        return record
    return Record(value=v, offset=offset + start, raw=bytes(chunk[start:stop]))
