"""`--tensorboard DIR_OR_FILE`: event files written by torch's own SummaryWriter during real trainings
(tests/collectors/tensorboard_runs.py), read back with our framing reader and checked against
tensorboard's own EventAccumulator; damaged files give partial evidence, never a traceback."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills.collectors import tensorboard as tb
from ml_skills.engine.pipeline import DiagnoseRequest
from ml_skills.errors import InputError, PathNotAllowed, TargetNotFound
from ml_skills.safety import paths

from .conftest import check_failed_run
from .tensorboard_runs import make, stop_step

pytestmark = pytest.mark.slow  # one session of real trainings (about 10 s), then each test is quick


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    return make(tmp_path_factory.mktemp("tb"), "nan", "diverging", "healthy")


def _main_file(run: Path) -> Path:
    return next(run.glob("events.out.tfevents.*"))


@pytest.mark.parametrize("kind, cause, status", [
    ("nan", "nan-inf", "diverged"), ("diverging", "optimization-divergence", "diverged"), ("healthy", None, None)])
def test_cli_diagnoses_summarywriter_runs_and_cites_the_step(runs, tmp_path, kind, cause, status):
    proc, report = check_failed_run("--tensorboard", str(runs[kind]), out=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert report["target_kind"] == "tensorboard" and report["primary_cause"] == cause
    series = {s["name"] for s in report["trajectory"]}
    assert {"loss", "val_loss", "grad_norm", "lr"} <= series  # Loss/train, add_scalars' Loss_val, grad_norm, lr
    if cause is None:
        assert report["anomalies"] == [] and report["run_status"] not in ("diverged", "crashed")
        return
    assert report["run_status"] == status
    step = stop_step(runs[kind])
    # the first non-finite loss, or the blow-up's peak: the step the training itself stopped at
    assert f"at step {step} " in report["root_cause"]["proximate"]


def test_reader_agrees_with_tensorboards_own_event_accumulator(runs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for run in runs.values():
        for f in run.rglob("events.out.tfevents.*"):
            acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
            acc.Reload()
            theirs = {(t, e.step): e.value for t in acc.Tags()["scalars"] for e in acc.Scalars(t)}
            ours = {}
            with paths.within([run]):
                for ev in tb.records(f):
                    for v in ev.summary.value:
                        ours[(v.tag, ev.step)] = tb._scalar(v)
            assert theirs and ours.keys() == theirs.keys()
            assert all(math.isnan(ours[k]) if math.isnan(theirs[k]) else math.isclose(ours[k], theirs[k], rel_tol=1e-6)
                       for k in theirs)


def test_truncated_event_file_gives_partial_evidence_and_a_clear_note(runs, tmp_path):
    run = tmp_path / "cut"
    shutil.copytree(runs["nan"], run)
    f = _main_file(run)
    data = f.read_bytes()
    f.write_bytes(data[: _record_start_near(data, 2 / 3) + 14])  # inside a record, as a killed writer or a partial copy leaves it
    proc, report = check_failed_run("--tensorboard", str(run), out=tmp_path / "out")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    notes = " ".join(report["report_lines"])
    assert "cut off at byte" in notes and "records before it were read" in notes
    assert report["trajectory"] and report["sources"][0].endswith("(partial)")


def _record_start_near(data: bytes, fraction: float) -> int:
    """The offset of the record nearest `fraction` of the file (TFRecord: u64 length, u32 crc, body, u32 crc)."""
    starts, at = [], 0
    while at < len(data):
        starts.append(at)
        at += 16 + int.from_bytes(data[at : at + 8], "little")
    return min(starts, key=lambda s: abs(s - len(data) * fraction))


def test_a_flipped_byte_is_a_checksum_mismatch_with_the_records_before_it_kept(runs, tmp_path):
    run = tmp_path / "flip"
    shutil.copytree(runs["diverging"], run)
    f = _main_file(run)
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    src = tb.collect(DiagnoseRequest(tensorboard=str(run))).source
    assert src.status == "partial" and any("checksum mismatch" in m for m in src.missing)
    assert 0 < len(src.metrics) < 44  # the steps before the damage, not the whole run


def test_garbage_named_like_an_event_file_is_partial_not_a_traceback(tmp_path):
    (tmp_path / "events.out.tfevents.1.host").write_bytes(b"not a tfrecord at all, just text\n" * 10)
    proc, report = check_failed_run("--tensorboard", str(tmp_path), out=tmp_path / "out")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert report["primary_cause"] is None and "checksum mismatch in the record header" in " ".join(report["report_lines"])


def test_not_event_files_are_one_line_errors(tmp_path):
    with pytest.raises(TargetNotFound, match="no TensorBoard event files"):
        tb.collect(DiagnoseRequest(tensorboard=str(tmp_path)))
    (tmp_path / "train.log").write_text("step 1 loss 2.0\n")
    with pytest.raises(InputError, match="not a TensorBoard event file"):
        tb.collect(DiagnoseRequest(tensorboard=str(tmp_path / "train.log")))
    proc, _ = check_failed_run("--tensorboard", str(tmp_path / "missing"), out=tmp_path / "out")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_a_directory_of_runs_reads_the_newest_and_names_the_others(runs, tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    for kind in ("healthy", "nan"):
        shutil.copytree(runs[kind], root / kind)
    for f in (root / "healthy").rglob("*"):
        os.utime(f, (1_000_000_000, 1_000_000_000))  # written long ago: nan is the newest run
    src = tb.collect(DiagnoseRequest(tensorboard=str(root))).source
    assert any("2 runs under" in m and "read the newest, nan" in m and "healthy" in m for m in src.missing)
    assert any(not math.isfinite(v) for p in src.metrics for v in p.values.values())  # nan's steps, not mixed with healthy's


def test_a_fifo_or_a_link_out_of_the_roots_is_skipped_never_waited_on(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["nan"], run)
    os.mkfifo(run / "events.out.tfevents.0.fifo")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(_main_file(runs["healthy"]), outside / "events.out.tfevents.9.x")
    (run / "events.out.tfevents.9.link").symlink_to(outside / "events.out.tfevents.9.x")
    with paths.within([run]):
        src = tb.collect(DiagnoseRequest(tensorboard=str(run))).source
    skipped = " ".join(src.missing)
    assert "events.out.tfevents.0.fifo skipped" in skipped and "events.out.tfevents.9.link skipped" in skipped
    with paths.within([tmp_path / "outside"]), pytest.raises(PathNotAllowed):
        tb.collect(DiagnoseRequest(tensorboard=str(run)))


def test_the_collector_never_writes(runs, tmp_path):
    run = tmp_path / "ro"
    shutil.copytree(runs["nan"], run)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.rglob("*") if p.is_file()}
    os.chmod(run, 0o555)
    try:
        proc, report = check_failed_run("--tensorboard", str(run), out=tmp_path / "out")
    finally:
        os.chmod(run, 0o755)
    assert proc.returncode == 0 and report["primary_cause"] == "nan-inf"
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.rglob("*") if p.is_file()} == before


def test_watch_run_polls_tensorboard_files_and_alerts_on_the_nan(runs, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "watch-run", "--tensorboard", str(runs["nan"]),
                           "--interval", "1", "--max-polls", "1"], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"at step {stop_step(runs['nan'])} " in proc.stdout


@pytest.mark.parametrize("tag, name", [
    ("Loss/train", "loss"), ("Loss/val", "val_loss"), ("Loss/test", "val_loss"), ("val/loss", "val/loss"),
    ("train/grad_norm", "train/grad_norm"), ("Accuracy/validation", "val_acc"), ("images/sample", "images/sample")])
def test_tags_fold_into_the_detectors_names(tag, name):
    assert tb.fold(tag) == name
