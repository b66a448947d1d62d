"""`redact_lines` (issue 17) is `[redact(x) for x in lines]`: the same lines and the same counts, but where a line is a
value whose secret's name sits on a line above (fifty-third round), which it masks too and counts once.

It looks for the rules' needles once in the batch's joined text and then, in each line's first pass, only for those;
the reference below redacts line by line. Batches mix ordinary log lines with planted secrets of every kind, escaped
and invisible-split spellings, Unicode folds and empty lines, so the needles a line holds vary across the batch.
"""

from __future__ import annotations

import random
from pathlib import Path

from ml_skills.safety import redact as R

from tests.security.fakes import Planted
from tests.security.test_redact_keyword_gate import _texts

TESTS = Path(__file__).resolve().parents[1]
ODD = ["", "\u200bghp_" + "a1B2" * 9, "tok\u200ben=abc123XYZdef456", "\\u0067hp_" + "x9Y8" * 9, "ｐａｓｓｗｏｒｄ：hunter2hunter2",
       "\u212aEY=abc123XYZdef456", "&#112;assword=hunter2hunter2", "\x1b[31mapi_key=abc123XYZdef456\x1b[0m", "[REDACTED]",
       "- name: HF_TOKEN", "  value: abc123XYZdef456", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"]


def _log_lines() -> list[str]:
    lines: list[str] = []
    for p in sorted(TESTS.glob("corpus/*/train.log"))[::25] + sorted(TESTS.glob("healthy/*/train.log"))[::25]:
        lines += p.read_text("utf-8", errors="replace").splitlines()[:200]
    return lines


def _one_by_one(lines: list[str]) -> tuple[list[str], int, int]:
    R.reset_redaction_count()
    R.reset_stripped_count()
    out = [R.redact(x) for x in lines]
    return out, R.redaction_count(), R.stripped_count()


def _batched(lines: list[str]) -> tuple[list[str], int, int]:
    R.reset_redaction_count()
    R.reset_stripped_count()
    out = R.redact_lines(lines)
    return out, R.redaction_count(), R.stripped_count()


def test_batches_redact_as_line_by_line() -> None:
    rng = random.Random(17)
    logs, planted, generated = _log_lines(), Planted().log_lines(), list(_texts(rng, 2000))
    assert len(logs) > 1000
    masked = 0
    for _ in range(300):
        batch = rng.sample(logs, rng.randint(0, 40))
        for pool in (planted, generated, ODD):
            batch += rng.sample(pool, rng.randint(0, 3))
        rng.shuffle(batch)
        want, got = _one_by_one(batch), _batched(batch)
        assert got[2] == want[2], batch
        extra = 0  # masks the batch adds where a line is a value whose secret's name sits above it (fifty-third round)
        for i, (g, w) in enumerate(zip(got[0], want[0], strict=True)):
            if g != w:
                assert R.named_above(batch[max(0, i - R.PRIOR_LINES) : i], batch[i]), (batch[i - 2 : i + 1], g, w)
                assert g.count(R.MASK) > w.count(R.MASK), (g, w)
                extra += g.count(R.MASK) - w.count(R.MASK)
        assert got[1] == want[1] + extra, batch
        masked += want[1] > 0
    assert masked > 100  # most batches held a secret


def test_ordinary_lines_keep_their_identity() -> None:
    lines = _log_lines()[:500]
    kept = [a is x for a, x in zip(R.redact_lines(lines), lines, strict=True)]
    assert kept == [R.redact(x) is x for x in lines]
    assert sum(kept) > 400


def _counted(run) -> tuple[list[str], int, int]:  # type: ignore[no-untyped-def]
    R.reset_redaction_count()
    R.reset_stripped_count()
    out = run()
    return out, R.redaction_count(), R.stripped_count()


def test_remembered_texts_come_back_as_computed_again_counts_included() -> None:
    rng = random.Random(18)
    pool = _log_lines()[:300] + Planted().log_lines() + list(_texts(rng, 300)) + ODD
    calls = [rng.sample(pool, rng.randint(0, 30)) for _ in range(200)]  # texts met again and again, as a CLI run does

    def run() -> list[str]:
        out: list[str] = []
        for i, batch in enumerate(calls):
            out += R.redact_lines(batch) if i % 2 else [R.redact(x) for x in batch]
            out += [R.redact(x) for x in out[-5:]]  # a redacted text redacted again (the report's last guards)
        return out

    plain = _counted(run)
    with R.remembered():
        remembered = _counted(run)
        assert R._memo.get()
    assert R._memo.get() is None
    assert remembered == plain
    assert plain[1] > 50 and plain[2] > 0  # secrets masked and characters stripped, each counted every time


def test_past_the_memo_cap_texts_are_still_redacted(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(R, "MEMO_SIZE", 5)
    lines = Planted().log_lines() + _log_lines()[:50]
    want = _counted(lambda: R.redact_lines(lines) + [R.redact(x) for x in lines])
    with R.remembered():
        assert _counted(lambda: R.redact_lines(lines) + [R.redact(x) for x in lines]) == want
        assert len(R._memo.get() or {}) == 5


def test_the_needle_scan_finds_what_in_finds() -> None:
    """`_needles_in` (one Hyperscan scan of a batch's lowered text, its database from the cache) gives the needles
    `n in text` gives, in the rules' order: on batches of log lines, planted secrets, generated keyword texts, Unicode
    and lone surrogates; and it is the Python search when the binding is missing."""
    rng = random.Random(18)
    spelled = [f"a {n.upper()} b" for n in R._NEEDLES] + [f"{n.title()}\u00e9" for n in R._NEEDLES]
    pools = [_log_lines(), Planted().log_lines(), list(_texts(rng, 2000)), ODD, ["\ud800key", "x\udfff.", "\u212a"], spelled]
    seen: set[str] = set()
    for _ in range(400):
        batch = [x for pool in pools for x in rng.sample(pool, min(len(pool), rng.randint(0, 12)))]
        lowered = "\n".join(x.lower() for x in batch)
        want = tuple(n for n in R._NEEDLES if n in lowered)
        assert R._needles_in(lowered) == want, batch
        seen.update(want)
    assert seen == set(R._NEEDLES)  # every needle was met
    if R._NEEDLE_SCAN[0] is not None:
        saved = R._NEEDLE_SCAN[:]
        R._NEEDLE_SCAN[:] = [None]
        try:
            assert R._needles_in("an api_key and a token") == tuple(n for n in R._NEEDLES if n in "an api_key and a token")
        finally:
            R._NEEDLE_SCAN[:] = saved
