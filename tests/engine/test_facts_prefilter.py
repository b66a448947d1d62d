"""Run facts read through Hyperscan's prefilter are the facts a search of every line finds (issue 17).

The prefilter only narrows which head and tail lines each fact pattern is tried on; a pattern that
Hyperscan runs approximately (look-aheads) still gets a superset of its lines, and lines that are
not plain ASCII are always tried. Checked on every real log of tests/corpus and tests/real-logs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.plan import facts
from ml_skills.engine.read import matcher
from ml_skills.engine.read.scan import scan_log

from tests import real_logs

ROOT = Path(__file__).resolve().parents[2]
LOGS = real_logs.sample([p for p in real_logs.logs("corpus/**/*", "real-logs/**/*")
                         if p.is_file() and p.suffix in (".log", ".txt", ".out", ".err") and p.stat().st_size > 0], 3)


@pytest.mark.skipif(matcher._hs is None, reason="hyperscan is not installed")
@pytest.mark.slow
def test_prefiltered_facts_equal_facts_from_every_line(monkeypatch):
    assert len(LOGS) >= 400
    evs = [scan_log(p) for p in LOGS]
    fast = [facts.run_facts([ev]) for ev in evs]
    assert facts._prefilter() is not None
    monkeypatch.setattr(facts, "_prefilter", lambda: None)  # the search of every gated line, as before
    slow = [facts.run_facts([ev]) for ev in evs]
    assert sum(len(f) for f in slow) > 80  # the corpus does state facts: the comparison is not empty
    for p, a, b in zip(LOGS, fast, slow, strict=True):
        assert a == b, p


def test_a_line_that_is_not_ascii_is_still_read():
    """Python's \\s matches a no-break space; Hyperscan's ASCII \\s does not, so such lines bypass the prefilter."""
    from ml_skills.models import Excerpt, LogEvidence

    ev = LogEvidence(source="x.log", head=Excerpt(source="x.log", start_line=1, lines=["  learning_rate:\u00a03e-4", "ok"]))
    got = facts.fact(facts.run_facts([ev]), "learning_rate")
    assert got is not None and got.line_no == 1


def test_the_lower_cased_gate_agrees_with_the_gate_on_every_corpus_line():
    """facts._gate tests ASCII lines lower-cased with a case-sensitive pattern (issue 17): the same answer as
    _GATE's (?i) search on every line of every real log, and on lines whose case or letters only (?i) folds."""
    lines = [ln for p in LOGS for ln in p.read_text("utf-8", errors="replace").splitlines()]
    lines += ["WORLD_SIZE=8", "Learning Rate 3e-4", "LR: 1e-3", "gLR 3", "\u212aB size", "ſize 4", "nproc_per_node", "GRAD"]
    assert len(lines) > 10_000
    gated = 0
    for ln in lines:
        want = facts._GATE.search(ln) is not None
        assert facts._gate(ln) == want, ln
        gated += want
    assert 1000 < gated < len(lines)  # both answers occur
