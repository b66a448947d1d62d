"""The on-disk cache of compiled Hyperscan databases: it only ever makes a run faster.

Each case runs the real CLI in a child process with its own ML_SKILLS_CACHE, so the cache is
written and read exactly as a user's runs write and read it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hyperscan")

ROOT = Path(__file__).resolve().parents[2]
LOGS = [ROOT / "examples" / "nan-loss" / "train.log", *sorted((ROOT / "tests" / "real-logs").glob("*/train.log"))[:2]]


def _diagnose(log: Path, cache: Path, out: Path) -> dict:
    """The engine's evidence and verdict for one log, scanned with Hyperscan, in a fresh process."""
    code = (
        "import json,sys\n"
        "from ml_skills.engine.pipeline import DiagnoseRequest, diagnose\n"
        "d = diagnose(DiagnoseRequest(target=sys.argv[1], engine='hyperscan'))\n"
        "print(d.model_dump_json(exclude={'created_at'}))\n"
    )
    env = {**os.environ, "ML_SKILLS_CACHE": str(cache)}
    r = subprocess.run([sys.executable, "-c", code, str(log)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _files(cache: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(cache.glob("hs-*.db"))} if cache.is_dir() else {}


def test_a_cold_run_fills_the_cache_and_a_warm_run_reads_it_with_identical_results(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold = [_diagnose(log, cache, tmp_path) for log in LOGS]
    written = _files(cache)
    assert written, "a cold run writes its compiled databases"
    assert all(data.startswith(b"MLSKHS1\n") for data in written.values())
    assert oct((cache).stat().st_mode & 0o777) == "0o700"
    mtimes = {f.name: f.stat().st_mtime_ns for f in cache.glob("hs-*.db")}
    warm = [_diagnose(log, cache, tmp_path) for log in LOGS]
    assert warm == cold
    assert {f.name: f.stat().st_mtime_ns for f in cache.glob("hs-*.db")} == mtimes, "a warm run rewrites nothing"


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "swap"])
def test_a_damaged_or_foreign_cache_file_is_detected_and_rebuilt(tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    log = LOGS[0]
    good = _diagnose(log, cache, tmp_path)
    files = sorted(cache.glob("hs-*.db"), key=lambda f: f.stat().st_size, reverse=True)
    big, small = files[0], files[-1]
    original = big.read_bytes()
    match damage:
        case "truncate":
            big.write_bytes(original[: len(original) // 2])
        case "flip":
            b = bytearray(original)
            b[len(b) // 2] ^= 0xFF
            big.write_bytes(bytes(b))
        case "garbage":
            big.write_bytes(b"MLSKHS1\n" + os.urandom(4096))
        case "swap":  # a whole, valid file of another database under this one's name
            big.write_bytes(small.read_bytes())
    assert _diagnose(log, cache, tmp_path) == good
    assert big.read_bytes() != b"" and big.read_bytes()[:8] == b"MLSKHS1\n"
    assert len(big.read_bytes()) == len(original), "the damaged file was replaced by a freshly compiled one"


def test_an_unwritable_or_impossible_cache_directory_never_fails_a_run(tmp_path: Path) -> None:
    log = LOGS[0]
    good = _diagnose(log, tmp_path / "ok", tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    for cache in (ro / "sub", not_a_dir / "sub", Path("/proc/ml-skills-cache")):
        assert _diagnose(log, cache, tmp_path) == good


def test_a_cache_file_writable_by_others_is_not_trusted(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    log = LOGS[0]
    good = _diagnose(log, cache, tmp_path)
    big = max(cache.glob("hs-*.db"), key=lambda f: f.stat().st_size)
    big.write_bytes(big.read_bytes())  # same content, now made world-writable
    big.chmod(0o666)
    ino = big.stat().st_ino
    assert _diagnose(log, cache, tmp_path) == good
    assert big.stat().st_ino != ino and big.stat().st_mode & 0o777 == 0o600, "compiled again and replaced"


def test_warm_cache_builds_the_databases_ahead_and_says_where(tmp_path: Path) -> None:
    env = {**os.environ, "ML_SKILLS_CACHE": str(tmp_path / "c")}
    r = subprocess.run(["ml-skills", "--warm-cache"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert str(tmp_path / "c") in r.stdout
    assert len(_files(tmp_path / "c")) >= 4
    bad = {**os.environ, "ML_SKILLS_CACHE": "/proc/ml-skills-cache"}
    r = subprocess.run(["ml-skills", "--warm-cache"], env=bad, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2 and "ML_SKILLS_CACHE" in r.stderr and "Traceback" not in r.stderr


def test_cached_only_loads_a_kept_database_and_compiles_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under cached_only() a database the cache does not hold raises NotCached, and nothing is compiled or written;
    one it holds is loaded. Outside the block (or in another thread's) compiling goes on as always."""
    import threading

    import hyperscan
    from ml_skills import dbcache

    monkeypatch.setenv("ML_SKILLS_CACHE", str(tmp_path))
    args = (hyperscan, [rb"loss\s*=\s*nan", rb"CUDA out of memory"], [0, 1], [hyperscan.HS_FLAG_MULTILINE] * 2, hyperscan.HS_MODE_BLOCK)
    with dbcache.cached_only(), pytest.raises(dbcache.NotCached):
        dbcache.compiled(*args)
    assert _files(tmp_path) == {}
    seen: list[object] = []
    with dbcache.cached_only():  # another thread compiles as always
        t = threading.Thread(target=lambda: seen.append(dbcache.compiled(*args)))
        t.start()
        t.join()
    assert seen and len(_files(tmp_path)) == 1
    with dbcache.cached_only():
        db = dbcache.compiled(*args)
    found: list[int] = []
    db.scan(b"step 3 loss = nan\n", match_event_handler=lambda i, *_: found.append(i), scratch=hyperscan.Scratch(db))
    assert found == [0]
