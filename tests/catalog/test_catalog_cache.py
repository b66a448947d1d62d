"""The parsed catalog, cached as JSON beside the compiled databases (issue 17): only ever faster, never different.

Each case loads the catalog in a child process with its own ML_SKILLS_CACHE, as a user's runs do, and
reports whether the TOML parser was imported: a warm run must not need it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills import diskcache

LOAD = (
    "import json, sys\n"
    "from ml_skills.catalog import loader\n"
    "out = {'signatures': [s.model_dump() for s in loader.signatures()],\n"
    "       'fixes': {k: f.model_dump() for k, f in loader.fixes().items()},\n"
    "       'rules': [r.model_dump() for r in loader.exception_rules()]}\n"
    "print(json.dumps({'catalog': out, 'parsed_toml': 'tomllib' in sys.modules}))\n"
)


def _load(cache: Path) -> tuple[dict, bool]:
    env = {**os.environ, "ML_SKILLS_CACHE": str(cache)}
    r = subprocess.run([sys.executable, "-c", LOAD], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    return out["catalog"], out["parsed_toml"]


def _file(cache: Path) -> Path:
    (f,) = cache.glob("catalog-*.json")
    return f


def test_a_cold_load_writes_the_cache_and_a_warm_one_reads_it_without_parsing_toml(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold, parsed = _load(cache)
    assert parsed, "a cold load parses the TOML"
    assert len(cold["signatures"]) > 100 and cold["fixes"] and cold["rules"]
    f = _file(cache)
    assert f.read_bytes().startswith(b"MLSKCAT1\n") and f.stat().st_mode & 0o777 == 0o600
    mtime = f.stat().st_mtime_ns
    warm, parsed = _load(cache)
    assert not parsed, "a warm load reads the cached JSON"
    assert warm == cold
    assert f.stat().st_mtime_ns == mtime, "a warm load rewrites nothing"


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "foreign", "world-writable"])
def test_a_damaged_foreign_or_untrusted_cache_file_is_parsed_again_and_replaced(tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    good, _ = _load(cache)
    f = _file(cache)
    original = f.read_bytes()
    match damage:
        case "truncate":
            f.write_bytes(original[: len(original) // 2])
        case "flip":  # one byte of the JSON changed: still JSON, no longer sealed
            b = bytearray(original)
            b[len(b) // 2] = ord("X") if b[len(b) // 2] != ord("X") else ord("Y")
            f.write_bytes(bytes(b))
        case "garbage":
            f.write_bytes(b"MLSKCAT1\n" + os.urandom(4096))
        case "foreign":  # a whole file, sealed to another name, under this one's
            payload = original[len(b"MLSKCAT1\n") + 32 :]
            f.write_bytes(b"MLSKCAT1\n" + diskcache._seal("another-key", payload) + payload)
        case "world-writable":
            f.chmod(0o666)
    again, parsed = _load(cache)
    assert parsed, "the damaged file was not used"
    assert again == good
    assert f.read_bytes() == original and f.stat().st_mode & 0o777 == 0o600, "replaced by a good file"


def test_an_unwritable_cache_directory_only_means_parsing_every_time(tmp_path: Path) -> None:
    good, _ = _load(tmp_path / "ok")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    for cache in (ro / "sub", Path("/proc/ml-skills-cache")):
        got, parsed = _load(cache)
        assert got == good and parsed
