"""Memory and process crashes, run for real: eager decoding under a memory limit (and the lazy
fix passing under the same limit), a segfault in a DataLoader worker, a native segfault with
faulthandler output, and an external SIGKILL (exit 137) with and without a checkpoint saved."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys

import pytest

from .harness import SCENARIOS, run, start, wait_for_line
from .report_checks import check, expect, line_of

pytestmark = pytest.mark.slow  # real training runs in child processes

EAGER_IMAGES, SIZE = 400, 192  # RGB as float32: 177 MB decoded, twice that while stacking
HEADROOM_MB = 120  # what the job may use above the interpreter + torch + PIL baseline


def _images(tmp_path, n: int, size: int, *flags: str):
    data = tmp_path / "data"
    subprocess.run([sys.executable, str(SCENARIOS / "make_images.py"), str(data), "--n", str(n), "--size", str(size), *flags],
                   check=True, capture_output=True, timeout=120)
    return data


def _baseline_vm_bytes() -> int:
    """Peak address space of a process that imports what the trainer imports and runs one step."""
    code = ("import numpy, torch, PIL.Image\n"
            "m = torch.nn.Linear(192, 4); m(torch.randn(16, 192)).sum().backward()\n"
            "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmPeak')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    return int(out.stdout.strip()) * 1024


def _limit(nbytes: int):
    def apply() -> None:  # runs in the child, as a container's or a scheduler's memory limit would
        resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
    return apply


def test_eager_decoding_runs_out_of_memory_and_lazy_loading_passes_under_the_same_limit(tmp_path):
    """Decoding 400 JPEGs into one tensor before step 1 under RLIMIT_AS: MemoryError; per-batch decoding passes under the same limit."""
    data = _images(tmp_path, EAGER_IMAGES, SIZE)
    limit = _limit(_baseline_vm_bytes() + HEADROOM_MB * 2**20)

    eager = run("image_trainer", tmp_path / "eager", str(data), "--loading", "eager", preexec_fn=limit)
    assert eager.returncode == 1
    last = eager.log.read_text().strip().splitlines()[-1]
    assert "MemoryError" in last or "can't allocate memory" in last, last  # the real allocation failure
    r = check(eager.log, tmp_path / "out-eager")
    expect(r, cls="oom", status="crashed", log=eager.log, line_text=last, fix_id="lazy-loading", risk="needs-approval",
           validation="host RSS stays flat", decision="NO-GO")
    assert r.data["fixes"][0]["fix_id"] == "lazy-loading"
    assert line_of(eager.log, "decoding all") < r.proximate_line  # it died before the first step
    assert not re.search(r"\] step \d+ \|", eager.log.read_text())

    # the recommended fix, proven: the same job with per-batch decoding under the same limit
    lazy = run("image_trainer", tmp_path / "lazy", str(data), "--loading", "lazy", preexec_fn=limit)
    assert lazy.returncode == 0, lazy.log.read_text()[-2000:]
    rss = [float(m) for m in re.findall(r"rss_mb (\d+)", lazy.log.read_text())]
    assert len(rss) >= EAGER_IMAGES // 16 and max(rss) <= 1.1 * min(rss)  # the fix's own validation: RSS flat within 10%
    ok = check(lazy.log, tmp_path / "out-lazy")
    assert ok.data["primary_cause"] is None and ok.data["run_status"] == "completed"
    assert ok.data["decision"] == "GO" and ok.data["insufficient_evidence"] is None  # nothing to recover


def test_segfault_in_a_dataloader_worker_is_a_process_crash(tmp_path):
    """A native decoder segfaults in DataLoader worker (num_workers=2); the main process loses the worker."""
    data = _images(tmp_path, 64, 32)
    lab = run("image_trainer", tmp_path / "run", str(data), "--workers", "2", "--batch-size", "4",
              env={"NATIVE_CRASH_INDEX": "5"})
    assert lab.returncode == 1
    text = lab.log.read_text(errors="replace")
    assert "Unexpected segmentation fault encountered in worker" in text  # what the dying worker prints
    # the main process then fails one of two ways, depending on timing: it names the dead worker
    # ("killed by signal") or only loses the connection to it (ConnectionResetError), sometimes after
    # another worker's EOFError; the decisive line is the worker's own report or the main process's
    r = check(lab.log, tmp_path / "out")
    expect(r, cls="process-crash", status="crashed", log=lab.log,
           line_text=("killed by signal: Segmentation fault", "Unexpected segmentation fault encountered in worker"),
           fix_id="loader-num-workers-zero", risk="safe", validation="real exception", decision="NO-GO")
    assert r.fix("faulthandler-stack")["risk"] == "safe"


def test_native_segfault_with_faulthandler_resumes_from_the_last_checkpoint(tmp_path):
    """A native call reads a null pointer at step 150 (PYTHONFAULTHANDLER=1); checkpoint at step 100."""
    lab = run("classify", tmp_path / "run", "--steps", "300", "--out", "ckpt", "--save-every", "100",
              env={"NATIVE_CRASH_STEP": "150", "PYTHONFAULTHANDLER": "1"})
    assert lab.returncode == -signal.SIGSEGV
    assert "in string_at" in lab.log.read_text()  # faulthandler's Python stack of the native crash
    r = check(lab.run_dir, tmp_path / "out")
    expect(r, cls="process-crash", status="crashed", log=lab.log, line_text="Fatal Python error: Segmentation fault",
           fix_id="resume-valid-checkpoint", risk="safe", validation="step greater than the checkpoint", decision="GO")
    newest = str(lab.run_dir / "ckpt" / "step_100.pt")
    assert r.data["artifacts"]["newest_valid_checkpoint"] == newest
    assert newest in r.fix("resume-valid-checkpoint")["command"]


def _killed_run(tmp_path, *train_args: str):
    """A launcher runs the trainer; something outside (a scheduler, a person) SIGKILLs the trainer."""
    run_dir = tmp_path / "run"
    proc = start("launcher", run_dir, "python", "classify.py", "--steps", "100000", *train_args)
    log = run_dir / "train.log"
    pid = int(wait_for_line(log, r"\(pid (\d+)\)", proc)[1])
    try:
        wait_for_line(log, r"\] step 250 \|", proc)
    finally:
        os.kill(pid, signal.SIGKILL)  # also when the wait failed: never leave the trainer running
    assert proc.wait(timeout=60) == 137  # the shell convention: 128 + 9
    return run_dir, log


def test_external_sigkill_with_flat_memory_is_a_crash_and_resumes(tmp_path):
    """SIGKILL from outside at step ~250 with flat logged RSS; the launcher reports exit status 137; checkpoints every 100 steps."""
    run_dir, log = _killed_run(tmp_path, "--out", "ckpt", "--save-every", "100")
    r = check(run_dir, tmp_path / "out")
    expect(r, cls="process-crash", status="crashed", log=log, line_text="exited with status 137",
           fix_id="resume-valid-checkpoint", risk="safe", validation="step greater than the checkpoint", decision="GO")
    assert "logged memory stayed flat" in r.data["root_cause"]["proximate"]
    assert "not the kernel OOM killer" in r.data["root_cause"]["root"]
    assert r.data["fixes"][0]["fix_id"] == "resume-valid-checkpoint"
    assert r.fix("check-kernel-oom")["risk"] == "safe"
    # the kill lands at step 250 or, on a loaded machine, a little later: resume from whatever the
    # run really saved last (step_200.pt, or step_300.pt when the trainer got that far)
    # (a save the kill cut short is skipped: torch.load itself says which files are whole)
    saved = sorted((run_dir / "ckpt").glob("step_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(saved) >= 2 and saved[0].name == "step_100.pt"
    newest = next(p for p in reversed(saved) if _loads(p))
    assert r.data["artifacts"]["newest_valid_checkpoint"] == str(newest)
    assert str(newest) in r.fix("resume-valid-checkpoint")["command"]


def _loads(path) -> bool:
    import torch

    try:
        torch.load(path, weights_only=True)  # our own run's file: safe to load as the ground truth
    except Exception:  # noqa: BLE001 (a torn file fails in zipfile, pickle or torch: any failure means it does not load)
        return False
    return True


def test_killed_before_any_save_says_writing_came_too_late(tmp_path):
    """The same SIGKILL, but the job saves only at the end: empty checkpoint directory."""
    run_dir, log = _killed_run(tmp_path, "--out", "ckpt")  # saves only at the end
    assert (run_dir / "ckpt").is_dir() and not any((run_dir / "ckpt").iterdir())
    r = check(run_dir, tmp_path / "out")
    expect(r, cls="process-crash", status="crashed", log=log, line_text="exited with status 137",
           fix_id="save-periodically", risk="needs-approval", validation="a checkpoint appears", decision="NO-GO")
    finding = next(f for f in r.data["findings"] if "no checkpoint" in f["title"])
    assert "writing happened too late" in finding["detail"] and "not that writing is broken" in finding["detail"]
    step = re.findall(r"\] step (\d+) \|", log.read_text())[-1]
    assert f"step {step}" in finding["detail"]
    assert "resume-valid-checkpoint" not in [f["fix_id"] for f in r.data["fixes"]]


