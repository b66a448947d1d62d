"""The catalog is data; these tests keep it honest: examples behave, ids are unique, every class
is covered, every fix exists and has a risk level, and both matching engines agree."""

from __future__ import annotations

import re

import pytest

from ml_skills.catalog.loader import exception_rules, fixes, signatures
from ml_skills.engine import matcher as matcher_mod
from ml_skills.engine.matcher import Matcher
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
