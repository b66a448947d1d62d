"""Data, configuration and checkpoint I/O failures, run for real: a truncated JPEG and a
mis-sized image read by DataLoader workers, labels out of range, a bad flag, incompatible
options, a full disk and a read-only mount under the checkpoint directory, and a resume from a
truncated checkpoint whose recommended recovery is then run and trains on."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys

import pytest

from .harness import SCENARIOS, run
from .report_checks import check, expect

pytestmark = pytest.mark.slow  # real training runs in child processes


def _images(tmp_path, *flags: str):
    data = tmp_path / "data"
    subprocess.run([sys.executable, str(SCENARIOS / "make_images.py"), str(data), "--n", "64", *flags],
                   check=True, capture_output=True, timeout=120)
    return data


@contextlib.contextmanager
def _mounted(target, *mount_args: str):
    """Mount something over `target` for the test (as root); skip where mounting is not allowed."""
    target.mkdir(parents=True, exist_ok=True)
    for args in mount_args:
        proc = subprocess.run(["mount", *shlex.split(args.format(target=target))], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            subprocess.run(["umount", str(target)], capture_output=True, check=False)
            pytest.skip(f"cannot mount here ({proc.stderr.strip()}): needs root with CAP_SYS_ADMIN")
    try:
        yield target
    finally:
        subprocess.run(["umount", str(target)], capture_output=True, check=False)


def test_truncated_jpeg_read_by_a_worker(tmp_path):
    """One JPEG cut to a third of its size, read in a DataLoader worker (num_workers=2)."""
    lab = run("image_trainer", tmp_path / "run", str(_images(tmp_path, "--truncate", "1")), "--workers", "2")
    assert lab.returncode == 1
    r = check(lab.log, tmp_path / "out")
    expect(r, cls="data-pipeline", status="crashed", log=lab.log, line_text="OSError: Truncated File Read",
           fix_id="skip-or-fix-bad-samples", risk="needs-approval", validation="full pass over the dataset", decision="NO-GO")
    assert r.fix("validate-dataset")["risk"] == "safe"
    assert "Caught OSError in DataLoader worker process" in lab.log.read_text()


def test_image_of_another_size_fails_to_collate(tmp_path):
    """One image of a different size; default_collate cannot stack the batch (in a worker)."""
    lab = run("image_trainer", tmp_path / "run", str(_images(tmp_path, "--odd-size", "1")), "--workers", "2")
    assert lab.returncode == 1
    text = lab.log.read_text()
    # in a worker, default_collate stacks into shared memory and reports a resize error; with the
    # batch collated in the main process it is the plain 'stack expects' message
    line = next(t for t in ("Trying to resize storage that is not resizable", "stack expects each tensor to be equal size") if t in text)
    r = check(lab.log, tmp_path / "out")
    expect(r, cls="data-pipeline", status="crashed", log=lab.log, line_text=line,
           fix_id="pad-or-resize-collate", risk="needs-approval", validation="one full epoch", decision="NO-GO")


# runs that fail before or at their first step: (how it fails, trainer args, exit code, class,
# error text, top fix, its risk, its validation, what the report must also say)
STARTUP = [
    pytest.param("Labels numbered 1..10 for a 10-way head: cross_entropy raises at the first batch (a device-side assert on a GPU).",
                 ["--label-base", "1"], 1, "data-pipeline", "IndexError: Target 10 is out of bounds",
                 "check-label-range", "safe", "min/max of labels", "device-side assert", id="label-out-of-range"),
    pytest.param("A misspelled flag (--lr-warmup): argparse exits 2 before training.",
                 ["--lr-warmup", "100"], 2, "config-error", "error: unrecognized arguments: --lr-warmup 100",
                 "fix-launch-command", "needs-approval", "gets past argument parsing", "argparse rejected", id="unknown-flag"),
    pytest.param("--fp16 with --bf16: the trainer's own check raises ValueError before training.",
                 ["--fp16", "--bf16"], 1, "config-error", "ValueError: At most one of fp16 and bf16 can be True",
                 "fix-config-key", "needs-approval", "configuration loads", "cannot be combined", id="fp16-and-bf16"),
]


@pytest.mark.parametrize("how, args, code, cls, line, fix, risk, validation, says", STARTUP)
def test_failure_at_startup(tmp_path, how, args, code, cls, line, fix, risk, validation, says):
    lab = run("classify", tmp_path / "run", *args)
    assert lab.returncode == code
    r = check(lab.run_dir, tmp_path / "out", how=how)
    expect(r, cls=cls, status="crashed", log=lab.log, line_text=line, fix_id=fix, risk=risk, validation=validation,
           decision="NO-GO")
    assert r.data["fixes"][0]["fix_id"] == fix
    assert says in r.data["root_cause"]["root"]
    assert not any("no checkpoint" in f["title"] for f in r.data["findings"])  # it never trained: no save was due yet


def test_full_disk_under_the_checkpoint_directory(tmp_path):
    """A 400 KB tmpfs under ckpt/: step 100 saves, step 200 fills the disk mid-write."""
    run_dir = tmp_path / "run"
    with _mounted(run_dir / "ckpt", "-t tmpfs -o size=400k tmpfs {target}"):  # room for one checkpoint
        lab = run("classify", run_dir, "--steps", "300", "--out", "ckpt", "--save-every", "100")
        assert lab.returncode == 1
        r = check(run_dir, tmp_path / "out")
    expect(r, cls="io-checkpoint", status="crashed", log=lab.log, line_text="basic_ios::clear: iostream error",
           fix_id="free-space-or-keep-fewer", risk="needs-approval", validation="room for at least two checkpoints", decision="NO-GO")
    ids = [f["fix_id"] for f in r.data["fixes"]]
    assert ids[0] == "free-space-or-keep-fewer"  # resuming before freeing space fails at the next save
    assert r.data["artifacts"]["newest_valid_checkpoint"] == str(run_dir / "ckpt" / "step_100.pt")
    assert any(not c["valid"] and c["path"].endswith("step_200.pt") for c in r.data["artifacts"]["checkpoints"])


def test_read_only_checkpoint_directory(tmp_path):
    """ckpt/ is a read-only bind mount: the first save at step 100 fails."""
    run_dir = tmp_path / "run"
    with _mounted(run_dir / "ckpt", "--bind {target} {target}", "-o remount,bind,ro {target}"):
        lab = run("classify", run_dir, "--steps", "150", "--out", "ckpt", "--save-every", "100")
        assert lab.returncode == 1
        r = check(run_dir, tmp_path / "out")
    expect(r, cls="io-checkpoint", status="crashed", log=lab.log, line_text="Read-only file system",
           fix_id="writable-output-dir", risk="needs-approval", validation="first save succeeds", decision="NO-GO")
    assert r.data["fixes"][0]["fix_id"] == "writable-output-dir"
    assert not any("no checkpoint" in f["title"] for f in r.data["findings"])  # here writing IS what is broken


def test_resume_from_truncated_checkpoint_goes_back_to_the_newest_valid_one(tmp_path):
    """step_200.pt truncated (killed mid-save); --resume ckpt/step_200.pt fails in torch.load; the recommended command is then run."""
    run_dir = tmp_path / "run"
    first = run("classify", run_dir, "--steps", "200", "--out", "ckpt", "--save-every", "100", log_name="attempt1.log")
    assert first.returncode == 0
    newest = run_dir / "ckpt" / "step_200.pt"
    os.truncate(newest, newest.stat().st_size // 2)  # the job was killed while writing it
    lab = run("classify", run_dir, "--steps", "400", "--out", "ckpt", "--save-every", "100", "--resume", "ckpt/step_200.pt")
    assert lab.returncode == 1
    r = check(run_dir, tmp_path / "out")
    expect(r, cls="io-checkpoint", status="crashed", log=lab.log, line_text="PytorchStreamReader failed reading zip archive",
           fix_id="resume-valid-checkpoint", risk="safe", validation="step greater than the checkpoint", decision="GO")
    valid = str(run_dir / "ckpt" / "step_100.pt")
    cmd = r.fix("resume-valid-checkpoint")["command"]
    assert cmd == f"python classify.py --steps 400 --out ckpt --save-every 100 --resume {valid}"
    assert cmd in r.data["next_commands"] and str(newest) not in cmd

    # GO, proven: run the recommended command; it resumes at step 101 and trains to the end
    argv = shlex.split(cmd)[2:]
    resumed = run("classify", run_dir, *argv, log_name="attempt3.log")
    assert resumed.returncode == 0, resumed.log.read_text()[-2000:]
    text = resumed.log.read_text()
    assert f"resuming from {valid}" in text and "] step 101 |" in text and "] step 100 |" not in text
