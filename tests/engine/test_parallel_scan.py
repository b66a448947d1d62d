"""A log scanned in forked workers gives the evidence one process gives, to the byte (issue 17).

The parallel path is forced with a threshold of one byte; small chunks (512 bytes) cut the corpus logs
into many chunks and three ranges, so lines cut by a chunk or a range boundary, hits of one
signature on both sides of a boundary, tracebacks, checkpoint saves and completion markers in
different workers are all merged. The caps (tracebacks kept, metric points kept, traceback chunks
read for framework markers) are lowered so that their merge rules are exercised on real logs too.
A generated benchmark log above the sampling threshold checks the sampled metrics, the exact
first NaN and the exact largest grad norm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills.engine.read import frameworks, parallel, scanpass
from ml_skills.engine.read.scan import scan_log
from ml_skills.models import AnomalyKind

from tests import real_logs

ROOT = Path(__file__).resolve().parents[2]
# The product never forks from a process with more than one thread (parallel.plan), and a whole test session holds
# threads other tests left (an MCP client's, a thread pool's): so these tests run in a fresh interpreter of their
# own, started by the one test below that the session collects.
INNER = os.environ.get("ML_SKILLS_PARALLEL_TESTS") == "inner"
inner = pytest.mark.skipif(not INNER, reason="run in a fresh process by test_the_parallel_scan_in_a_fresh_process")


@pytest.mark.slow
@pytest.mark.skipif(INNER, reason="the outer run")
def test_the_parallel_scan_in_a_fresh_process() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
                          env={**os.environ, "ML_SKILLS_PARALLEL_TESTS": "inner"}, cwd=ROOT,
                          capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert "5 passed, 1 skipped" in last, proc.stdout[-2000:]  # every test of the file, this one skipped inside
LOGS = real_logs.sample([p for p in real_logs.logs("corpus/**/*", "real-logs/**/*")
                         if p.is_file() and p.suffix in (".log", ".txt", ".out", ".err") and p.stat().st_size > 0], 3)


def _same(path: Path, **kw) -> tuple[str, str]:
    one = scan_log(path, parallel_bytes=1 << 62, **kw)
    many = scan_log(path, parallel_bytes=1, **kw)
    return repr(one.model_dump()), repr(many.model_dump())


@pytest.fixture
def spied(monkeypatch, tmp_path: Path) -> Path:
    """Every range scanned appends its process id to a file: the children's answers must be the ones used."""
    record = tmp_path / "pids"
    inner = parallel._scan_range

    def spy(*a, **k):
        with record.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return inner(*a, **k)

    monkeypatch.setattr(parallel, "_scan_range", spy)
    return record


@inner
@pytest.mark.slow
def test_corpus_logs_scan_the_same_in_three_workers(monkeypatch, spied: Path) -> None:
    monkeypatch.setattr(scanpass, "TRACEBACKS_KEPT", 4)
    monkeypatch.setattr(scanpass, "MAX_POINTS_KEPT", 16)
    monkeypatch.setattr(frameworks, "TRACEBACK_CHUNKS", 2)
    assert len(LOGS) >= 400
    forked = 0
    for p in LOGS:
        spied.write_text("")
        one, many = _same(p, workers=3, chunk_size=512)
        assert one == many, p
        pids = spied.read_text().split()
        if len(pids) > 1:
            forked += 1
            assert len(set(pids)) == len(pids), f"{p}: a worker's range was scanned again in the parent"
    assert forked >= 300  # most corpus logs are over 1 KiB: the parallel path really ran


@inner
@pytest.mark.slow
def test_a_sampled_benchmark_log_scans_the_same_in_parallel(tmp_path: Path, spied: Path) -> None:
    log = tmp_path / "train.log"
    truth = json.loads(subprocess.run([sys.executable, str(ROOT / "bench" / "genlog.py"), str(log), "--size", "24M"],
                                      capture_output=True, text=True, check=True, timeout=300).stdout)
    for workers, chunk in ((2, 4 << 20), (4, 1 << 20)):  # with 4, the spike (at 29%) is a worker's
        spied.write_text("")
        one, many = _same(log, workers=workers, chunk_size=chunk)
        assert one == many, (workers, chunk)
        assert len(set(spied.read_text().split())) == workers
    ev = scan_log(log, parallel_bytes=1, workers=4, chunk_size=1 << 20)
    tr = ev.trajectory
    assert tr.first_nan_line == truth["first_nan"]["line"]
    spike = next(a for a in tr.anomalies if a.kind is AnomalyKind.GRAD_SPIKE)
    assert spike.line_no == truth["spike"]["line"]
    assert tr.last_progress is not None and tr.last_progress.line_no == truth["last_progress"]["line"]
    assert ev.total_lines == truth["lines"]


@inner
def test_chunk_starts_are_the_chunks_of_a_pass(tmp_path: Path) -> None:
    """The boundaries a worker is given are those iter_chunks cuts, long lines (cut mid-line) included."""
    from ml_skills.collectors import logfile

    log = tmp_path / "a.log"
    log.write_bytes(b"".join((b"x" * (i * 37 % 3000)) + b"\n" for i in range(400)))
    size = log.stat().st_size
    for chunk in (512, 1000, 4096):
        walked = [off for off, _ in logfile.iter_chunks(log, size=chunk, limit=size)]
        assert logfile.chunk_starts(log, size, chunk) == walked
        ranges = parallel.plan(log, size, chunk, threshold=1, workers=3)
        assert ranges is not None and [r[1] for r in ranges] == [walked[r[0]] for r in ranges]
        again = [off for _, start, end in ranges for off, _ in logfile.iter_chunks(log, size=chunk, limit=end, start=start)]
        assert again == walked


@inner
def test_a_threaded_process_scans_in_one_process(tmp_path: Path) -> None:
    """Forking beside other threads could leave a child waiting on a lock forever: not done."""
    import threading

    log = tmp_path / "a.log"
    log.write_bytes(b"step 1 loss 2.0\n" * 5000)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert parallel.plan(log, log.stat().st_size, 4096, threshold=1, workers=2) is None
    finally:
        stop.set()
        t.join()
    assert parallel.plan(log, log.stat().st_size, 4096, threshold=1, workers=2) is not None


@inner
def test_a_line_longer_than_a_chunk_is_never_cut_between_workers(tmp_path: Path, spied: Path) -> None:
    """A line longer than the chunks where the ranges would be cut, with a signature and a traceback header
    all along it: the ranges start after it instead (one line read by two workers would be counted, and read
    for framework markers, twice), and the evidence is one process's. (The line is the real OOM message and
    traceback header of corpus case 005, repeated into one long line: what a log whose newlines were lost,
    or a progress bar redrawn with carriage returns, looks like.)"""
    real = (ROOT / "tests/corpus").glob("005-*/train.log").__next__().read_text().splitlines()
    oom = next(x for x in real if "CUDA out of memory" in x)
    long_line = " ".join([oom, "Traceback (most recent call last):"] * 20)
    head = "\n".join(real[:8])
    log = tmp_path / "cut.log"
    log.write_text(head + "\n" + long_line + "\n" + "\n".join(real * 3) + "\n")
    size = log.stat().st_size
    line_start, line_end = len(head) + 1, len(head) + 1 + len(long_line)
    assert line_start < size // 3 < line_end, "a cut by bytes alone would fall inside the long line"
    ranges = parallel.plan(log, size, 512, threshold=1, workers=3)
    assert ranges is not None and len(ranges) >= 2
    assert all(start > line_end for _, start, _ in ranges[1:])
    one, many = _same(log, workers=3, chunk_size=512)
    assert one == many
    assert len(set(spied.read_text().split())) == len(ranges)
