"""Issue 14's twenty-third round: attacks from outside on the code new since the twenty-second (the CLI's plain models, the
hot file of re programs and the sealed cache files beside it, batches 28-30's readings and signatures), and on the engine's
other patterns a fuzzer found slow on a run of spaces (the readings of a log's end, an LSF report's rest).

Each test is one family of attacks that broke a claim of docs/security.md, driven through a real MCP client over stdio or the
CLI in a child process, with real files; each failed on the code before its fix (see docs/security.md, "Twenty-third round").
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.mcp.conftest import Server, timed_calls
from tests.security.childcli import cli

pytestmark = pytest.mark.slow  # real child processes and servers

ULTRALYTICS_HEADER = "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\n"


def test_a_row_of_spaces_under_an_ultralytics_header_never_holds_the_cli_or_scan_log(tmp_path: Path) -> None:
    """Promise 9: a hostile file gets a verdict in bounded time. The line under a metric table's header is read as a row,
    its progress bar cut off first with `:?\\s+\\d{1,3}%\\|` (batch 28's Ultralytics rows), which read each run of spaces to
    its end from every space of it: 35 s for one row of 60,000 spaces, hours for a row of a megabyte. Three such rows
    (150 KB) held the CLI past a minute; the search holds the interpreter, so the server's deadline cannot answer either."""
    log = tmp_path / "run" / "train.log"
    log.parent.mkdir()
    rows = "".join(f"      {i}/100      3.2G      1.{i:03d}      0.9      1.1         55        640: 100%|###| 4/4\n" for i in range(1, 9))
    log.write_text(ULTRALYTICS_HEADER + rows + (ULTRALYTICS_HEADER + " " * 50_000 + "x\n") * 3)
    t = time.monotonic()
    try:
        proc = cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(tmp_path / "out"), cwd=tmp_path, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("check-failed-run on a 150 KB log of space rows under Ultralytics headers ran past 60 s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.monotonic() - t < 30
    assert json.loads(proc.stdout)["run_status"]  # a verdict, not only an exit code
    srv = Server(tmp_path, roots=[tmp_path])
    try:
        got = timed_calls(srv, [("scan_log", {"path": str(log)}), ("diagnose", {"target": str(log)})], limit=60)
    except TimeoutError:
        pytest.fail("scan_log or diagnose gave no answer within 60 s")
    for err, body, took in got:
        assert not err and took < 40, (took, body[:500])


def _seal(key: str, payload: bytes) -> bytes:
    """diskcache's seal, as anyone can compute it: a SHA-256 of the key and the payload (it proves a file intact, not ours)."""
    return hashlib.sha256(key.encode() + b"\0" + payload).digest()


def _hostile_caches(warm: Path, where: Path) -> dict[str, Path]:
    """Copies of a warm cache directory, each with one kind of cache file replaced by a sealed hostile payload of this user's
    own (mode 0600), as a container image or a copied home directory can hold: a payload nested 100,000 deep, or every
    kept re program handed a group count of 10**9."""
    from ml_skills.catalog import loader, recache, tomlcache

    magic = {"rh": recache.MAGIC, "re": recache.MAGIC, "rs": recache.SET_MAGIC, "catalog": loader.MAGIC, "toml": tomlcache.MAGIC}
    deep = b"[" * 100_000 + b"]" * 100_000

    def huge_groups(payload: bytes) -> bytes:
        data = json.loads(payload)
        entries = data if isinstance(data, list) else data.values()
        for e in entries:
            e[2] = 10**9
        return json.dumps(data).encode()

    cases = {}
    for prefix, kind in [("rh", "deep"), ("rh", "groups"), ("rs", "deep"), ("rs", "groups"), ("catalog", "deep"), ("toml", "deep")]:
        cache = where / f"{prefix}-{kind}"
        shutil.copytree(warm, cache)
        files = sorted(cache.glob(f"{prefix}-*.json"))
        assert files, f"the warm cache holds no {prefix}- file"
        for f in files:
            key = f.name[len(prefix) + 1 : -len(".json")]
            payload = f.read_bytes()[len(magic[prefix]) + 32 :]
            payload = deep if kind == "deep" else huge_groups(payload)
            f.write_bytes(magic[prefix] + _seal(key, payload) + payload)
            f.chmod(0o600)
        cases[f"{prefix}-{kind}"] = cache
    return cases


def test_a_sealed_cache_file_nested_too_deep_or_naming_a_billion_groups_never_ends_the_run(tmp_path: Path) -> None:
    """Promise 9: a hostile file never turns the CLI's answer into a crash or a blow-up. The cache's seal is a SHA-256 anyone
    can compute, so it proves a file intact, not well formed. A sealed payload of 100,000 `[` raised RecursionError out of
    the run (the hot re programs' with a raw traceback; the pattern sets', the catalog's and the policy TOML's as "internal
    error"), and a kept re program handed a group count of 10**9 (which `_sre` does not check) took all the memory there
    was: the machine's OOM killer ended the run. Each now means compiling or parsing again, with the same report."""
    log = tmp_path / "run" / "train.log"
    log.parent.mkdir()
    log.write_text("".join(f"step {i} loss {2.0 - i * 0.01:.4f}\n" for i in range(60)) + "step 60 loss nan\n"
                   "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nFloatingPointError: loss is nan\n")
    warm = tmp_path / "warm"

    def report(cache: Path) -> dict:
        out = tmp_path / "out" / cache.name
        proc = cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(out), cwd=tmp_path, timeout=120,
                    env={"ML_SKILLS_CACHE": str(cache)})
        assert proc.returncode == 0 and not proc.stderr, (cache.name, proc.returncode, proc.stderr[-2000:])
        data = json.loads(proc.stdout)
        data.pop("created_at")
        return data

    report(warm)
    expected = report(warm)  # the second run reads the hot file the first wrote
    assert expected["primary_cause"] is not None
    for name, cache in _hostile_caches(warm, tmp_path / "hostile").items():
        assert report(cache) == expected, name


def test_a_long_run_of_spaces_after_a_loss_name_or_a_counter_never_holds_a_small_logs_diagnosis(tmp_path: Path) -> None:
    """Promise 9: bounded time. A log under 32 KiB is read in a fresh process (the CLI, the server's first call) by `re`,
    each catalog signature its Hyperscan database finds in the chunk run over the whole chunk. Batch 29's signatures split
    a run of spaces between two `\\s*` (`loss\\s*[:=]?\\s*nan`, now also after `SmoothL1`, `nll`, `bce`, `ctc`;
    `^\\s*\\d+\\s*[,:|\\t ]\\s*nan`; `loss_scale\\s*:?\\s*[:=]`), every split tried: a 30 KB log holding one real NaN line and
    one name or counter followed by 30,000 spaces held the CLI 50-84 s. The same language, each space read by one
    quantifier (`nan-inf.toml`)."""
    took = {}
    for name, real, hostile in [("smoothl1", "SmoothL1=nan", "SmoothL1"), ("counter", "76980 nan", "1"), ("control", "76980 nan", "abc")]:
        log = tmp_path / name / "train.log"
        log.parent.mkdir()
        filler = " " * 30_000 if name != "control" else "abcdefghij" * 3_000
        log.write_text(f"step 1 loss 2.0\n{real}\n{hostile}{filler}x\n")
        assert log.stat().st_size < 32 * 1024  # the `re` engine's size
        t = time.monotonic()
        try:
            proc = cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(log.parent / "out"), cwd=tmp_path,
                        timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"check-failed-run on a 30 KB log ({name}) ran past 120 s")
        assert proc.returncode == 0, proc.stderr[-2000:]
        took[name] = time.monotonic() - t
        assert "nan" in json.dumps(json.loads(proc.stdout)["primary_cause"]).lower(), name  # the real NaN line is still read
    assert max(took["smoothl1"], took["counter"]) < 4 * took["control"] + 10, took
    srv = Server(tmp_path, roots=[tmp_path])
    try:  # a fresh server's first call on a small log reads it with `re` too
        got = timed_calls(srv, [("scan_log", {"path": str(tmp_path / "smoothl1" / "train.log")})], limit=60)
    except TimeoutError:
        pytest.fail("scan_log gave no answer within 60 s")
    assert not got[0][0] and got[0][2] < 40, got[0][1][:500]


def test_a_counter_or_score_name_before_a_run_of_spaces_never_holds_the_tail_readings(tmp_path: Path) -> None:
    """Promise 9: bounded time. The readings of a log's end split a run of spaces between three quantifiers: the final
    counter's `epoch\\s*[:#=]?\\s*\\[?\\s*\\d+` (and its inner `step\\s*:?\\s*\\(?\\s*`), the last progress line's, and a
    score's `0\\s*%?\\s*\\.?[}\\])]*\\s*$`; every split of three was tried, cubic in the run: one tail line of `epoch` and
    2,000 spaces (a tail line's cut) cost 60 s, so a tail of them ran for hours in the CLI and in `diagnose`. The same
    languages, each space read by one quantifier (`finalcounter`, `lastprogress`, `zeroscores`, `ranks`, `stops`)."""
    log = tmp_path / "run" / "train.log"
    log.parent.mkdir()
    lines = [(w + " " * 1990 + end) for w, end in [("epoch", "[x"), ("step", "x"), ("AP: 0", "x"), ("iteration", "(x")]] * 20
    log.write_text("".join(f"step {i} loss {2.0 - i * 0.01:.3f}\n" for i in range(60)) + "\n".join(lines) + "\n")
    t = time.monotonic()
    try:
        proc = cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(tmp_path / "out"), cwd=tmp_path, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("check-failed-run on a tail of counter names before 2,000 spaces ran past 60 s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.monotonic() - t < 30
    srv = Server(tmp_path, roots=[tmp_path])
    try:
        got = timed_calls(srv, [("diagnose", {"target": str(log)})], limit=60)
    except TimeoutError:
        pytest.fail("diagnose gave no answer within 60 s")
    assert not got[0][0] and got[0][2] < 40, got[0][1][:500]


def test_a_line_of_spaces_after_a_job_reports_verdict_never_holds_the_attempts_reading(tmp_path: Path) -> None:
    """Promise 9: bounded time. An LSF job report's verdict ('Exited with exit code 1.') ends an attempt, and the lines after
    it are read as the rest of the report with `^\\s*(...)?\\s*$`, which tried every split of a line of spaces between its
    two quantifiers: two reports each followed by a line of 60,000 spaces held the CLI 17 s (0.3 s with letters)."""
    took = {}
    for name, filler in [("control", "abcdef" * 10_000), ("spaces", " " * 60_000)]:
        log = tmp_path / name / "train.log"
        log.parent.mkdir()
        steps = "".join(f"step {i} loss {2.0 - i * 0.01:.3f}\n" for i in range(60))
        log.write_text((steps + f"Exited with exit code 1.\n{filler}x\n") * 2)
        t = time.monotonic()
        try:
            proc = cli("check-failed-run", str(log), "--format", "json", "--out-dir", str(log.parent / "out"), cwd=tmp_path,
                        timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"check-failed-run on two job reports ({name}) ran past 120 s")
        assert proc.returncode == 0, proc.stderr[-2000:]
        took[name] = time.monotonic() - t
    assert took["spaces"] < 4 * took["control"] + 4, took
