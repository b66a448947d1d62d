"""preflight-run on real small jobs: real smoke and probe runs, a real producer still writing
shards, real images, real archives."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from ..conftest import run_cli

SC = Path(__file__).parent / "scenarios"


def preflight(tmp_path: Path, *args: str) -> tuple[int, dict]:
    proc = run_cli("preflight-run", *args, "--out-dir", str(tmp_path / "o"), "--format", "json", timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def verdict(report: dict, name: str) -> str:
    return next(c["verdict"] for c in report["checks"] if c["name"] == name)


def test_good_script_smoke_and_throughput_budget(tmp_path):
    rc, r = preflight(tmp_path, str(SC / "good_train.py"), "--smoke-args", f"--steps 3 --out {tmp_path / 's'}",
                      "--probe-args", f"--steps 80 --batch-size 32 --step-seconds 0.05 --out {tmp_path / 'p'}",
                      "--samples-per-step", "32", "--total-samples", "1000000", "--epochs", "2", "--cost-per-hour", "3.5",
                      "--platform-cap-hours", "24")
    assert rc == 0, r
    assert verdict(r, "compile") == verdict(r, "checkpointing") == verdict(r, "smoke run") == "pass"
    per_1k = float(r["facts"]["seconds_per_1000_samples"])
    assert 0.8 < per_1k < 6.0  # 0.05 s per step of 32 samples = 1.56 s per 1,000 plus compute
    hours = float(r["facts"]["budget_hours"])
    assert abs(hours - per_1k * 2_000_000 / 1000 / 3600) < 0.05
    assert abs(float(r["facts"]["budget_cost"]) - hours * 3.5) < 0.05


def test_script_that_saves_only_at_the_end_fails_checkpointing(tmp_path):
    rc, r = preflight(tmp_path, str(SC / "bad_train.py"))
    assert rc == 1
    assert verdict(r, "checkpointing") == "fail"
    detail = next(c["detail"] for c in r["checks"] if c["name"] == "checkpointing")
    assert "periodic" in detail and "resume" in detail


def test_failing_smoke_run_is_diagnosed(tmp_path):
    rc, r = preflight(tmp_path, str(SC / "bad_train.py"), "--smoke-args", "--break --steps 1")
    assert rc == 1 and verdict(r, "smoke run") == "fail"
    detail = next(c["detail"] for c in r["checks"] if c["name"] == "smoke run")
    assert "exit 1" in detail and "mat1 and mat2 shapes cannot be multiplied" in detail


def test_missing_import_fails_compile(tmp_path):
    rc, r = preflight(tmp_path, str(SC / "missing_import.py"))
    assert rc == 1 and verdict(r, "compile") == "fail"
    assert "definitely_not_a_real_package_ml_skills" in r["checks"][0]["detail"]


PRODUCER = """
import os, sys, time
d, n, pause, more = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
for i in range(n):
    if i == 3:
        while not os.path.exists(more):  # the rest of the source data has not arrived yet
            time.sleep(0.05)
    tmp = os.path.join(d, f"shard-{i:05d}.bin.tmp")
    with open(tmp, "wb") as f:
        f.write(os.urandom(4096))
    os.rename(tmp, os.path.join(d, f"shard-{i:05d}.bin"))
    time.sleep(pause)
open(os.path.join(d, "_SUCCESS"), "w").close()
"""


def test_refuses_to_start_while_a_producer_is_writing(tmp_path):
    data, more = tmp_path / "shards", tmp_path / "more-source-data"
    data.mkdir()
    producer = subprocess.Popen([sys.executable, "-c", PRODUCER, str(data), "8", "0.5", str(more)])
    try:
        # the trainer starts while shards 0-2 exist: the shard-zero story. The producer holds shard 3 until
        # the check is done; a fixed head start let a loaded machine finish all 8 and the marker first.
        deadline = time.monotonic() + 120
        while not (data / "shard-00002.bin").exists():
            assert producer.poll() is None and time.monotonic() < deadline, "the producer never wrote shard 2"
            time.sleep(0.05)
        rc, r = preflight(tmp_path, str(SC / "good_train.py"), "--data", str(data), "--expect-shards", "8",
                          "--marker", "_SUCCESS", "--shard-pattern", "shard-*.bin", "--quiet-seconds", "2")
        assert rc == 1 and verdict(r, "input completeness") == "fail"
        assert "3 shard(s) matching 'shard-*.bin', expected 8" in next(c["detail"] for c in r["checks"] if c["name"] == "input completeness")
    finally:
        more.touch()
        producer.wait(timeout=60)
    time.sleep(2.2)
    rc, r = preflight(tmp_path, str(SC / "good_train.py"), "--data", str(data), "--expect-shards", "8",
                      "--marker", "_SUCCESS", "--shard-pattern", "shard-*.bin", "--quiet-seconds", "2")
    assert verdict(r, "input completeness") == "pass", r


def test_eager_decode_memory_budget(tmp_path):
    data = tmp_path / "images"
    data.mkdir()
    for i in range(12):
        Image.new("RGB", (1000, 1000), (i * 20, 0, 0)).save(data / f"img{i}.jpg", quality=90)
    _, r = preflight(tmp_path, str(SC / "good_train.py"), "--data", str(data), "--memory-limit", "24M", "--quiet-seconds", "0")
    assert verdict(r, "memory budget") == "fail"
    assert int(r["facts"]["decoded_dataset_bytes"]) == 12 * 1000 * 1000 * 3
    _, r = preflight(tmp_path, str(SC / "good_train.py"), "--data", str(data), "--memory-limit", "1G", "--quiet-seconds", "0")
    assert verdict(r, "memory budget") == "pass"


@pytest.mark.parametrize("launch, ok", [("python good_train.py --steps 100", False),
                                        ("nohup timeout 30h python good_train.py --steps 100 &", False),
                                        ("nohup timeout 23h python good_train.py --steps 100 &", True)])
def test_launch_detached_with_timeout_under_cap(tmp_path, launch, ok):
    _, r = preflight(tmp_path, str(SC / "good_train.py"), "--launch", launch, "--platform-cap-hours", "24")
    assert verdict(r, "detached launch") == ("pass" if ok else "fail")


def test_results_archive_finds_the_same_experiment(tmp_path):
    archive = tmp_path / "archive" / "run-7"
    archive.mkdir(parents=True)
    (archive / "command.txt").write_text("python good_train.py --steps 100 --batch-size 32\n")
    rc, r = preflight(tmp_path, str(SC / "good_train.py"), "--args", "--steps 100 --batch-size 32", "--results-archive", str(tmp_path / "archive"))
    assert rc == 1 and verdict(r, "results archive") == "fail" and "run-7" in r["checks"][-1]["detail"]
    _, r = preflight(tmp_path, str(SC / "good_train.py"), "--args", "--steps 500", "--results-archive", str(tmp_path / "archive"))
    assert verdict(r, "results archive") == "pass"
