"""A one-shot run on a small log scans it with `re` instead of compiling the Hyperscan database
first (about 0.9 s): the evidence must be the same either way, and a large log or a process that
has already compiled Hyperscan keeps using it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills.engine.read import matcher, scan

from tests import real_logs

ROOT = Path(__file__).resolve().parents[2]
# the corpus logs a fresh process reads with `re` (under scan.SMALL_LOG_BYTES; batch 21 brought longer ones), by size
SMALL = sorted((p for p in (ROOT / "tests" / "corpus").glob("*/train.log") if p.stat().st_size < scan.SMALL_LOG_BYTES),
               key=lambda p: p.stat().st_size)
CASES = [SMALL[len(SMALL) // 2], SMALL[-1], ROOT / "examples" / "nan-loss" / "train.log"]

PROBE = """
import json, sys
from ml_skills.engine.read import scan
ev = scan.scan_log(sys.argv[1])
print(json.dumps({"engines": sorted(str(e) for e in scan._compiled), "evidence": ev.model_dump(mode="json", exclude={"mtime"})}))
"""


@pytest.mark.skipif(matcher._hs is None, reason="hyperscan is not installed: `re` is the only engine")
@pytest.mark.parametrize("log", CASES, ids=lambda p: p.parent.name)
def test_a_fresh_process_reads_a_small_log_with_re_and_finds_the_same(log):
    assert log.stat().st_size < scan.SMALL_LOG_BYTES
    out = subprocess.run([sys.executable, "-c", PROBE, str(log)], capture_output=True, text=True, timeout=120, check=True)
    fresh = json.loads(out.stdout)
    assert fresh["engines"] == ["re"]  # the Hyperscan database was never compiled
    fast = scan.scan_log(log, engine="hyperscan").model_dump(mode="json", exclude={"mtime"})
    assert json.dumps(fresh["evidence"], sort_keys=True) == json.dumps(fast, sort_keys=True)  # as text: NaN != NaN


@pytest.mark.skipif(matcher._hs is None, reason="hyperscan is not installed")
def test_large_logs_and_warm_processes_use_hyperscan():
    assert scan._engine_for(scan.SMALL_LOG_BYTES, None) is None
    scan._matcher(None)  # compiled, as in a running MCP server
    assert scan._engine_for(100, None) is None
    assert scan._engine_for(100, "re") == "re"


LOGS = real_logs.sample(real_logs.CORPUS_AND_HEALTHY, 5)


def _unguided(m: matcher.Matcher) -> matcher.Matcher:
    """The same `re` matcher running every pattern (no Hyperscan database to say which may match)."""
    import copy

    plain = copy.copy(m)
    plain._db = None
    if m._gated is not None:
        plain._gated = _unguided(m._gated)
    return plain


def _find(m: matcher.Matcher, chunk: bytes, limit: int | None) -> tuple[str, list[tuple[int, int]]]:
    try:
        return "all", m.find(chunk, limit)
    except matcher.ScanLimit as e:
        return "limit", e.found


@pytest.mark.skipif(matcher._hs is None, reason="hyperscan is not installed: `re` runs every pattern")
def test_the_re_engine_guided_by_the_cached_database_finds_what_it_finds_alone(tmp_path, monkeypatch):
    """A small log's `re` matchers run only the patterns their Hyperscan database (when the cache holds it) reports:
    the same matches, in the same order, with the same limits, as running every pattern, on a sample of the corpus and
    healthy logs (tests/real_logs.py; the order of same-line matches is `re`'s, which Hyperscan's own reports would not give: issue 17)."""
    from ml_skills.engine.read import frameworks

    monkeypatch.setenv("ML_SKILLS_CACHE", str(tmp_path))
    scan._matcher.__wrapped__(None)  # the databases, compiled and written to the cache
    frameworks._matcher.__wrapped__(None)
    guided = [scan._matcher.__wrapped__("re")[0], frameworks._matcher.__wrapped__("re")]
    assert all(m._db is not None for m in guided) and guided[0]._gated is not None and guided[0]._gated._db is not None
    pairs = [(m, _unguided(m)) for m in guided]
    assert len(LOGS) > 400
    for log in LOGS:
        chunk = log.read_bytes()
        for m, plain in pairs:
            for limit in (None, 3):
                assert _find(m, chunk, limit) == _find(plain, chunk, limit), log.parent.name
