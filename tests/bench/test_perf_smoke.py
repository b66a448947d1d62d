"""Performance smoke checks for CI: gross regressions of the scan against ripgrep, exactness of the
events that sampling must never lose, and the memory/tail properties that do not depend on timing.

The benchmark itself (bench/run.py) measures the goals; these tests only fail on a collapse (the
scan under 0.3x ripgrep's throughput), not on absolute time, which is noise on a shared machine.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ml_skills.collectors import logfile
from ml_skills.engine.read import matcher as matcher_mod
from ml_skills.engine.read import scan
from ml_skills.models import AnomalyKind

from bench.genlog import generate
from bench.patterns import export
from tests import real_logs


@pytest.fixture(scope="module")
def log50(tmp_path_factory):
    path = tmp_path_factory.mktemp("perf") / "train.log"
    truth = generate(path, 50 * 2**20)
    return path, truth


def test_planted_events_are_exact_on_a_sampled_log(log50):
    path, truth = log50
    ev = scan.scan_log(path)
    assert any("metrics sampled" in p for p in ev.problems), "50 MiB is above the full-parse limit: sampling must be on"
    tr = ev.trajectory
    assert tr.first_nan_line == truth["first_nan"]["line"]
    spike = next(a for a in tr.anomalies if a.kind is AnomalyKind.GRAD_SPIKE)
    assert spike.line_no == truth["spike"]["line"]
    assert f"{truth['spike']['grad_norm']:.4g}" in spike.detail
    assert tr.last_progress is not None and tr.last_progress.line_no == truth["last_progress"]["line"]
    assert ev.total_lines == truth["lines"]
    hit_lines = {h.line_no for h in ev.hits}
    assert truth["failures"]["early-cuda-oom"] + 9 in hit_lines  # the RuntimeError line of the OOM traceback
    assert truth["failures"]["middle-nccl-watchdog"] in hit_lines
    assert truth["failures"]["late-nccl-watchdog"] + 2 in hit_lines


def test_spike_hidden_between_samples_is_still_found(tmp_path):
    """A spike that sampling skips over: the per-chunk threshold scan must bring it back exactly."""
    path = tmp_path / "gn.log"
    lines = [f"step={i} loss={2.0 - i * 1e-6:.6f} grad_norm={0.8 + (i % 7) * 0.01:.3f} lr=1.0e-04" for i in range(1, 400_001)]
    lines[277_777] = "step=277778 loss=1.722222 grad_norm=812.5 lr=1.0e-04"
    path.write_text("\n".join(lines) + "\n")
    ev = scan.scan_log(path)
    assert any("metrics sampled" in p for p in ev.problems)
    spike = next(a for a in ev.trajectory.anomalies if a.kind is AnomalyKind.GRAD_SPIKE)
    assert spike.line_no == 277_778 and spike.step == 277_778
    assert "812.5" in spike.detail


def test_scan_is_not_grossly_slower_than_ripgrep(log50, tmp_path):
    rg = shutil.which("rg")
    if rg is None:
        pytest.skip("ripgrep not installed (tests/run.sh installs it)")
    path, _ = log50
    pats, _ = export(tmp_path)
    scan._matcher(None)  # compile once, outside the timing, as a long-running server would
    scan.scan_log(path)  # and the grad-norm thresholds this log needs

    def cpu_of_rg() -> float:
        import resource

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run([rg, "--no-unicode", "-c", "-f", str(pats), str(path)], capture_output=True, check=False)
        assert r.returncode == 0 and int(r.stdout) > 0, r.stderr[-500:]  # rg really ran the catalog and found the planted failures
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    def cpu_of_scan() -> float:
        t = time.process_time()
        scan.scan_log(path)
        return time.process_time() - t

    rg_cpu = min(cpu_of_rg() for _ in range(3))
    scan_cpu = min(cpu_of_scan() for _ in range(3))
    ratio = rg_cpu / scan_cpu
    assert ratio >= 0.3, f"full-log scan at {ratio:.2f}x ripgrep's throughput (rg {rg_cpu:.2f}s, scan {scan_cpu:.2f}s CPU)"


def test_tail_reads_a_bounded_amount_whatever_the_size(log50):
    path, _truth = log50
    lines, cut = logfile.tail(path, 500)
    assert len(lines) == 500 and not cut
    assert "Watchdog caught collective operation timeout" in lines[-1]


def test_chunks_end_at_newlines_and_cover_the_file(tmp_path):
    path = tmp_path / "x.log"
    data = b"".join(b"line %d " % i + b"x" * (i % 300) + b"\n" for i in range(40_000)) + b"no newline at end"
    path.write_bytes(data)
    chunks = [(o, bytes(c)) for o, c in logfile.iter_chunks(path, size=64 * 1024)]  # the buffer is reused
    assert b"".join(c for _, c in chunks) == data
    assert all(c.endswith(b"\n") for _, c in chunks[:-1])
    assert [o for o, _ in chunks] == [sum(len(c) for _, c in chunks[:i]) for i in range(len(chunks))]


def test_whole_scan_matcher_agrees_in_both_engines_on_real_logs():
    """Signatures and markers over every real corpus log: same lines in hyperscan and re."""
    if matcher_mod._hs is None:
        pytest.skip("hyperscan not installed")
    text = b"".join(p.read_bytes() + b"\n" for p in real_logs.sample(real_logs.logs("corpus/*/train.log"), 3))
    fast, _ = scan._matcher("hyperscan")
    slow, _ = scan._matcher("re")

    def lines(found):
        single = {i for i, s in enumerate(fast.single) if s}
        return {(i, text.count(b"\n", 0, max(0, end - 1))) for i, end in found if i not in single}, {i for i, _ in found if i in single}

    assert lines(fast.find(text)) == lines(slow.find(text))


def test_check_failed_run_reads_the_log_once(log50, tmp_path):
    """The CLI end to end reads a 50 MiB log once: its bytes read exceed those of a 10 KiB run by about the log's size."""
    path, _ = log50
    tiny = tmp_path / "tiny.log"
    generate(tiny, 10 * 2**10, seed=2)
    env = {**__import__("os").environ, "PYTHONPATH": f"{ROOT / 'server'}:{ROOT}"}

    def read_bytes(log: Path) -> int:
        out = subprocess.run([sys.executable, str(ROOT / "bench" / "probe.py"), "cli", str(log), str(tmp_path)],
                             capture_output=True, text=True, env=env, check=True)
        return __import__("json").loads(out.stdout.strip().splitlines()[-1])["read_bytes"]

    extra = read_bytes(path) - read_bytes(tiny)
    size = path.stat().st_size
    assert size <= extra < 1.25 * size, f"read {extra / size:.2f}x the log"
