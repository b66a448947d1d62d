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

ROOT = Path(__file__).resolve().parents[2]
SMALL = sorted((ROOT / "tests" / "corpus").glob("*/train.log"), key=lambda p: p.stat().st_size)
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
