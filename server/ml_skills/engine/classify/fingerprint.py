"""A failure fingerprint that is the same across runs of one failure: class + rule + normalised line.

Two runs that died of the same thing print the same line with different numbers (the step, the
pid, the rank, the address, the time, the shard path): those are replaced by placeholders, in an
order where the most specific shape goes first (a timestamp before its numbers, a path before
the digits in it). Quoted words stay: KeyError 'adamw' and KeyError 'lion' are different bugs.
triage-runs groups runs by it; the repeat rule (engine/plan/repeat.py) compares a run's attempts by it.
"""

from __future__ import annotations

import hashlib
import re

from ml_skills.lazyre import lazy
from ml_skills.models import Diagnosis

MAX_LINE = 240

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (lazy(r"\b\d{4}[-/]\d\d[-/]\d\d(?:[ T_]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"), "<time>"),
    (lazy(r"\b\d\d:\d\d:\d\d(?:[.,]\d+)?\b"), "<time>"),
    (lazy(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE), "<url>"),
    (lazy(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "<id>"),
    (lazy(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (lazy(r"\[[0-9a-f:]*:[0-9a-f:]+\](?::\d+)?", re.IGNORECASE), "<ip>"),
    (lazy(r"(?:(?<=[\s'\"(=:,\[])|^)(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:/[^\s'\"(),:\[\]]+)+/?"), "<path>"),
    (lazy(r"\b0x[0-9a-f]+\b", re.IGNORECASE), "<hex>"),
    (lazy(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:[KMGTP]i?B|bytes)\b"), "<size>"),  # 2.00 GiB and 512.00 MiB: one OOM
    (lazy(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.IGNORECASE), "<hex>"),
    (lazy(r"\b(?:[a-z][\w-]*\.)+(?:com|net|org|io|internal|local|lan|cluster|svc|compute)\b", re.IGNORECASE), "<host>"),
)
_KEEP = lazy(r"\b(?:b?float|u?int|fp|bf|tf|complex|sm_|cuda|py)\d+\b", re.IGNORECASE)
_NUMBER = lazy(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_SPACE = lazy(r"\s+")
_PRIVATE = lazy("[\ue000-\uf8ff]")


def normalise(line: str) -> str:
    """The line with run-specific values replaced; the same failure in two runs gives the same text."""
    text = _PRIVATE.sub("", line)
    for rx, repl in _RULES:
        text = rx.sub(repl, text)
    kept: list[str] = []

    def hold(m: re.Match[str]) -> str:
        kept.append(m.group(0))
        return chr(0xE000 + len(kept) - 1)  # a private-use character: no digit for _NUMBER to touch

    text = _KEEP.sub(hold, text)
    text = _NUMBER.sub("<n>", text)
    text = _PRIVATE.sub(lambda m: kept[ord(m.group(0)) - 0xE000], text)
    text = re.sub(r"(?:<n>[,/x:]?)+<n>", "<n>", text)  # 3/60, 2x4, 1,024: one value
    return _SPACE.sub(" ", text).strip()[:MAX_LINE]


def signature(failure_class: str | None, rule: str | None, line: str | None) -> str:
    return f"{failure_class or '-'} | {rule or '-'} | {normalise(line or '')}"


def fingerprint(sig: str) -> str:
    return hashlib.sha1(sig.encode("utf-8")).hexdigest()[:12]


_SIGNAL_KINDS = {"signature", "traceback", "anomaly", "source", "stop"}


def decisive_rule(d: Diagnosis) -> str | None:
    """The signature, exception rule or detector behind the primary class: the engine lists the
    primary class's strongest signal first in the evidence, as 'label: text' (other classes' carry a [tag])."""
    if d.primary_cause is None:
        return None
    for item in d.evidence:
        if item.kind in _SIGNAL_KINDS:
            label = item.text.split(": ", 1)[0]
            return None if "[" in label else label[:80]
    return None


def of_diagnosis(d: Diagnosis) -> tuple[str | None, str | None, str | None]:
    """(rule, signature, fingerprint) of a failed diagnosis; the last two are None when no class was found."""
    if d.primary_cause is None:
        return None, None, None
    line = d.root_cause.proximate_line.text if d.root_cause.proximate_line else None
    rule = decisive_rule(d)
    sig = signature(d.primary_cause.value, rule, line)
    return rule, sig, fingerprint(sig)
