"""The shipped policy's TOML, parsed once and kept as JSON (issue 17): only ever faster, never different.

Each case loads the default policy in a child process with its own ML_SKILLS_CACHE, as a user's runs do, and reports
whether the TOML parser was imported: a warm run must not need it. A user's --policy file is parsed as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from ml_skills import diskcache
from ml_skills.catalog import tomlcache
from ml_skills.errors import InputError
from ml_skills.policy import rules

LOAD = (
    "import json, sys\n"
    "from ml_skills.policy import rules\n"
    "p = rules.load()\n"
    "print(json.dumps({'policy': [p.source, p.data.model_dump(mode='json')], 'parsed_toml': 'tomllib' in sys.modules}))\n"
)


def _load(cache: Path) -> tuple[list, bool]:
    env = {**os.environ, "ML_SKILLS_CACHE": str(cache)}
    r = subprocess.run([sys.executable, "-c", LOAD], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    return out["policy"], out["parsed_toml"]


def test_a_warm_load_reads_the_kept_policy_without_parsing_toml(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold, parsed = _load(cache)
    assert parsed, "a cold load parses the TOML"
    (f,) = cache.glob("toml-*.json")
    assert f.read_bytes().startswith(tomlcache.MAGIC) and f.stat().st_mode & 0o777 == 0o600
    warm, parsed = _load(cache)
    assert not parsed, "a warm load reads the kept JSON"
    assert warm == cold == ["default policy", rules.PolicyFile.model_validate(
        tomllib.loads(rules.DEFAULT_POLICY.read_text("utf-8"))).model_dump(mode="json")]


@pytest.mark.parametrize("damage", ["flip", "foreign", "world-writable"])
def test_a_damaged_or_untrusted_file_is_parsed_again(tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    good, _ = _load(cache)
    (f,) = cache.glob("toml-*.json")
    original = f.read_bytes()
    payload = original[len(tomlcache.MAGIC) + 32 :]
    match damage:
        case "flip":
            f.write_bytes(original[:-3] + b"X" + original[-2:])
        case "foreign":
            f.write_bytes(tomlcache.MAGIC + diskcache._seal("another-key", payload) + payload)
        case "world-writable":
            f.chmod(0o666)
    again, parsed = _load(cache)
    assert parsed and again == good


@pytest.mark.parametrize("text", ["a = 1\nb = [1.5, 'x']\n[t]\nc = true\n", "d = 1979-05-27T07:32:00Z\n", "f = nan\n", ""])
def test_parsed_is_tomllib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("ML_SKILLS_CACHE", str(tmp_path))
    want = tomllib.loads(text)
    first, second = tomlcache.parsed(text), tomlcache.parsed(text)
    assert repr(first) == repr(second) == repr(want)  # nan != nan: compared as written
    assert len(list(tmp_path.glob("toml-*.json"))) == (1 if text in ("", "a = 1\nb = [1.5, 'x']\n[t]\nc = true\n") else 0)


def test_a_bad_policy_file_is_still_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "p.toml"
    bad.write_text("version = = 1\n")
    with pytest.raises(InputError, match="cannot be read"):
        rules.load(bad)
    with pytest.raises(tomllib.TOMLDecodeError):
        tomlcache.parsed("version = = 1\n")
