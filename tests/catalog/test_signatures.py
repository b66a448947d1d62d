"""The catalog is data; these tests keep it honest: examples behave, ids are unique, every class
is covered, every fix exists and has a risk level, and both matching engines agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ml_skills.catalog.loader import exception_rules, fixes, signatures
from ml_skills.engine.read import matcher as matcher_mod
from ml_skills.engine.read.matcher import Matcher, ScanLimit
from ml_skills.models import FailureClass, Risk
from ml_skills.policy.risk import risk_of

SIGS = signatures()
ENGINES = ["re"] + (["hyperscan"] if matcher_mod._hs is not None else [])


def test_ids_are_unique():
    ids = [s.id for s in SIGS]
    assert len(ids) == len(set(ids))


def test_every_class_has_signatures():
    covered = {s.failure_class for s in SIGS}
    # stalled / evaluation-mismatch / divergence are mostly found from trajectories, but still need some
    assert covered == set(FailureClass)


def test_every_signature_has_examples_and_known_fixes():
    fx = fixes()
    for s in SIGS:
        assert s.examples.match, f"{s.id} has no matching example"
        assert s.examples.no_match, f"{s.id} has no non-matching example"
        assert s.fixes, f"{s.id} names no fix"
        for f in s.fixes:
            assert f in fx, f"{s.id} names unknown fix {f}"
    for r in exception_rules():
        for f in r.fixes:
            assert f in fx, f"exception rule {r.id} names unknown fix {f}"


def test_a_narrowing_signature_reads_a_line_its_broader_one_matches():
    """`narrows` names real signatures, and each of its examples that match is also matched by the broader one (the
    narrowing silences it only on a line both match)."""
    by_id = {s.id: s for s in SIGS}
    for s in SIGS:
        for broad in s.narrows:
            assert broad in by_id and broad != s.id, f"{s.id} narrows unknown {broad}"
            pat = re.compile(by_id[broad].pattern)
            assert any(pat.search(x) for x in s.examples.match), f"{s.id}: no example that {broad} also reads"


def test_every_fix_has_a_risk_and_a_validation():
    for f in fixes().values():
        risk, rule = risk_of(f.kind)
        assert risk in Risk and rule
        assert f.validation and f.time_to_try


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("sig", SIGS, ids=[s.id for s in SIGS])
def test_examples_behave_as_declared(sig, engine):
    m = Matcher([sig.pattern], engine=engine)
    for line in sig.examples.match:
        assert m.find(line.encode() + b"\n"), f"{sig.id} should match: {line}"
        assert re.search(sig.pattern, line), "the pattern as written (per line) must match too"
    for line in sig.examples.no_match:
        assert not m.find(line.encode() + b"\n"), f"{sig.id} should not match: {line}"


def test_fast_path_and_fallback_find_the_same_matches_on_all_examples():
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan not installed here")
    text = "\n".join(e for s in SIGS for e in [*s.examples.match, *s.examples.no_match]).encode() + b"\n"
    patterns = [s.pattern for s in SIGS]
    fast = Matcher(patterns, engine="hyperscan").find(text)
    slow = Matcher(patterns, engine="re").find(text)

    def lines(found):
        return {(i, text.count(b"\n", 0, max(0, end - 1))) for i, end in found}

    assert lines(fast) == lines(slow)


def test_patterns_never_cross_a_line():
    m = Matcher([r"loss[^|]*nan"], engine="re")
    assert not m.find(b"loss 1.0\nnan here\n")


GATED = [s for s in SIGS if s.gate]
REAL_TEXT = [p for d in ("corpus", "real-logs") for p in sorted((Path(__file__).parents[1] / d).rglob("*"))
             if p.is_file() and p.suffix in (".log", ".txt", ".out")]


def test_some_signatures_are_gated():
    assert {"loss-value-nan", "grad-norm-nonfinite", "grad-norm-huge"} <= {s.id for s in GATED}


@pytest.mark.parametrize("sig", GATED, ids=[s.id for s in GATED])
def test_a_gate_matches_every_line_its_pattern_matches(sig):
    """A gate is only sound if it is implied by the pattern: checked on the examples and every real log line."""
    full, gate = re.compile(sig.pattern), re.compile(sig.gate)
    lines = list(sig.examples.match) + [ln for p in REAL_TEXT for ln in p.read_text(errors="replace").splitlines()]
    matched = [ln for ln in lines if full.search(ln)]
    assert len(matched) >= len(sig.examples.match)
    missed = [ln for ln in matched if not gate.search(ln)]
    assert not missed, f"{sig.id}'s gate misses lines its pattern matches: {missed[:3]}"


@pytest.mark.parametrize("engine", ENGINES)
def test_gated_and_ungated_scans_find_the_same_matches_on_real_logs(engine):
    patterns, gates = [s.pattern for s in SIGS], [s.gate for s in SIGS]
    gated, plain = Matcher(patterns, engine=engine, gates=gates), Matcher(patterns, engine=engine)
    fired = 0
    for p in REAL_TEXT:
        data = p.read_bytes()
        a, b = gated.find(data), plain.find(data)
        assert a == b, p
        fired += any(SIGS[i].gate for i, _ in a)
    assert fired >= 5  # the gated signatures really occur in these logs


def test_a_chunk_where_no_gate_fires_skips_the_gated_patterns():
    gated = Matcher([r"loss=(nan|inf)", r"ERROR"], gates=[r"=(nan|inf)", None])
    assert gated.find(b"step 1 loss=2.5\nERROR x\n") == [(1, 21)]
    assert gated.find(b"step 1 loss=nan\nstep 2 x=nan\n") == [(0, 15)]
    with pytest.raises(ScanLimit) as capped:  # the limit counts matches, never the gate's own report
        gated.find(b"loss=nan\nERROR\nloss=inf\n", limit=2)
    assert capped.value.found == [(0, 8), (1, 14)]
