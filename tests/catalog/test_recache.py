"""Compiled `re` programs kept between CLI runs (catalog/recache.py, issue 17): the same pattern objects, only faster.

Patterns are compared with `==`, which for compiled patterns compares their flags, source and compiled code."""

from __future__ import annotations

import gc
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills import diskcache
from ml_skills.catalog import recache
from ml_skills.lazyre import LazyPattern

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("ml_skills.engine.pipeline", "ml_skills.engine.attempts", "ml_skills.safety.redact", "ml_skills.render.text",
           "ml_skills.collectors.ssh", "ml_skills.grid.groups")


def _engine_patterns() -> list[tuple[str | bytes, int]]:
    """Every lazy pattern the engine, the redaction and the collectors define (what a diagnosis compiles from)."""
    for m in MODULES:
        importlib.import_module(m)
    found = {o._source for o in gc.get_objects() if isinstance(o, LazyPattern)}
    return sorted(found, key=repr)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ML_SKILLS_CACHE", str(tmp_path))
    _fresh_process(monkeypatch)
    return tmp_path


def _fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recache, "_loaded", None)
    monkeypatch.setattr(recache, "_new", {})
    monkeypatch.setattr(recache, "_hot", None)
    monkeypatch.setattr(recache, "_used", {})
    monkeypatch.setattr(recache, "_missed", False)


def test_a_kept_program_gives_the_pattern_re_compile_gives(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pats = _engine_patterns() + [(rb"(?i)loss\s*[:=]\s*(?P<v>nan)", 0), ("(?<=a)b|é+", re.IGNORECASE | re.MULTILINE)]
    assert len(pats) > 100
    first = [recache.compile(p, f) for p, f in pats]  # none kept yet: re.compile, programs noted
    assert len(recache._new) == len(pats)
    recache.save()
    _fresh_process(monkeypatch)
    second = [recache.compile(p, f) for p, f in pats]  # all from the file
    assert recache._new == {}
    for (p, f), a, b in zip(pats, first, second, strict=True):
        want = re.compile(p, f)
        assert a == want and b == want, p
        assert (b.groups, b.groupindex, b.flags) == (want.groups, want.groupindex, want.flags), p


def test_a_damaged_file_or_a_program_sre_refuses_means_re_compile(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pat = r"(?P<key>[A-Za-z_]\w*)\s*=\s*(?P<val>\d+)"
    recache.compile(pat, 0)
    recache.save()
    (f,) = cache.glob("re-*.json")
    f.write_bytes(f.read_bytes()[:-20])  # truncated: the seal no longer matches
    _fresh_process(monkeypatch)
    assert recache.compile(pat, 0) == re.compile(pat) and len(recache._new) == 1  # compiled again, noted again
    bogus = {recache._name(pat, 0): recache._packed([0, [999, 1, 2], 2, {"key": 1, "val": 2}, [None, "key", "val"]])}
    diskcache.write(f, recache._KEY, json.dumps(bogus).encode(), recache.MAGIC, recache.KEEP)
    _fresh_process(monkeypatch)
    rx = recache.compile(pat, 0)
    assert rx == re.compile(pat) and rx.search("x lr = 3")["val"] == "3"


def test_the_cli_writes_the_programs_and_reports_the_same_with_them(tmp_path: Path) -> None:
    log = ROOT / "examples" / "nan-loss" / "train.log"
    env = {**os.environ, "ML_SKILLS_CACHE": str(tmp_path / "cache")}

    def run(out: str) -> dict:
        r = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", str(log), "--out-dir", str(tmp_path / out),
                            "--format", "json"], env=env, capture_output=True, text=True, timeout=120, check=False)
        assert r.returncode in (0, 1), r.stderr[-2000:]
        d = json.loads(r.stdout)
        d.pop("created_at", None)
        return d

    cold = run("a")
    (kept,) = (tmp_path / "cache").glob("re-*.json")
    assert len(json.loads(diskcache.read(kept, recache._KEY, recache.MAGIC) or b"{}")) > 20
    assert run("b") == cold


def test_a_run_reads_the_hot_programs_only_not_every_program_the_cache_has_seen(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pats = _engine_patterns()
    many, run = pats, pats[: len(pats) // 3]
    assert len(many) > recache.HOT_MAX > len(run) > 50
    for p, f in many:  # a cache that has seen every pattern (--warm-cache, many logs)
        recache.compile(p, f)
    recache.save(hot=False)
    assert not list(cache.glob("rh-*.json"))
    _fresh_process(monkeypatch)
    first = [recache.compile(p, f) for p, f in run]  # from the whole file, and the hot file written at exit
    assert recache._loaded is not None and recache._missed
    recache._save_hot()
    (hot,) = cache.glob("rh-*.json")
    assert len(json.loads(diskcache.read(hot, recache._KEY, recache.MAGIC) or b"{}")) == len(run)
    _fresh_process(monkeypatch)
    second = [recache.compile(p, f) for p, f in run]
    assert recache._loaded is None and not recache._missed and recache._new == {}  # the whole file never read
    assert second == first == [re.compile(p, f) for p, f in run]
    _fresh_process(monkeypatch)
    other = pats[len(pats) // 3:]  # a run of another kind of log: the hot file stays within HOT_MAX
    assert [recache.compile(p, f) for p, f in other] == [re.compile(p, f) for p, f in other]
    recache._save_hot()
    assert len(json.loads(diskcache.read(hot, recache._KEY, recache.MAGIC) or b"{}")) <= max(recache.HOT_MAX, len(other))


def test_a_bad_pattern_raises_re_error_as_re_compile_does(cache: Path) -> None:
    with pytest.raises(re.error):
        recache.compile(r"(unclosed", 0)
    assert recache._new == {}


def test_warm_cache_keeps_the_programs_of_every_pattern_the_engine_defines(tmp_path: Path) -> None:
    env = {**os.environ, "ML_SKILLS_CACHE": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "ml_skills.cli", "--warm-cache"], env=env, capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0 and "regular-expression programs" in r.stdout, r.stderr[-2000:]
    (kept,) = tmp_path.glob("re-*.json")
    programs = json.loads(diskcache.read(kept, recache._KEY, recache.MAGIC) or b"{}")
    assert len(programs) >= 200  # every lazy pattern the engine, the redaction and the renderers define


def _small_log_sets() -> list[list[bytes]]:
    """The pattern sets of the `re` engine a small log is read with (scan.py's matcher and its gated one, the
    framework markers)."""
    from ml_skills.engine.read import frameworks, scan

    m = scan._matcher("re")[0]
    sets = [m.patterns, frameworks._matcher("re").patterns] + ([m._gated.patterns] if m._gated else [])
    return [[p.encode() for p in s] for s in sets]


def test_a_kept_pattern_set_gives_the_patterns_re_compile_gives(cache: Path) -> None:
    sets = _small_log_sets() + [[rb"(?i)loss\s*[:=]\s*(?P<v>nan)", rb"(?<=a)b|\xe9+"]]
    assert sum(len(s) for s in sets) > 150
    for pats in sets:
        first = recache.compile_set(pats, re.MULTILINE)  # not kept yet: compiled, then written
        second = recache.compile_set(pats, re.MULTILINE)  # from the file, each made when first read
        assert isinstance(second, recache.PatternSet) and len(second) == len(pats)
        for p, a, b in zip(pats, first, second, strict=True):
            want = re.compile(p, re.MULTILINE)
            assert a == want and b == want, p
            assert (b.groups, b.groupindex, b.flags) == (want.groups, want.groupindex, want.flags), p
    assert len(list(cache.glob("rs-*.json"))) == len(sets)
    assert not list(cache.glob("re-*.json"))  # the lazy patterns' file is not touched


def test_a_damaged_set_file_means_re_compile_and_a_bad_pattern_raises(cache: Path) -> None:
    pats = [rb"(?P<key>[A-Za-z_]\w*)\s*=\s*(?P<val>\d+)", rb"nan|inf"]
    recache.compile_set(pats, 0)
    (f,) = cache.glob("rs-*.json")
    f.write_bytes(f.read_bytes()[:-20])  # truncated: the seal no longer matches
    got = list(recache.compile_set(pats, 0))
    assert got == [re.compile(p) for p in pats] and got[0].search(b"x lr = 3")["val"] == b"3"
    key = f.name[3:-5]
    diskcache.write(f, key, json.dumps([recache._packed([0, [999, 1, 2], 2, {"key": 1, "val": 2}, [None, "key", "val"]]),
                                        recache._packed([0, [999], 0, {}, [None]])]).encode(), recache.SET_MAGIC, recache.SET_KEEP)
    assert list(recache.compile_set(pats, 0)) == [re.compile(p) for p in pats]  # programs _sre refuses: compiled again
    with pytest.raises(re.error):
        recache.compile_set([rb"(unclosed"], 0)
