"""The CLI as a user runs it: real child processes, real files, every kind of bad input."""

from __future__ import annotations

import json
import os

import jsonschema
import pytest

from .conftest import ROOT, run_cli

SCHEMA = json.loads((ROOT / "schemas" / "check-failed-run.schema.json").read_text())
NAN_LOG = ROOT / "examples" / "nan-loss" / "train.log"


def test_report_and_json_for_a_real_log(cli):
    proc, report = cli(str(NAN_LOG), "--framework", "pytorch", "--task", "regression")
    assert proc.returncode == 0, proc.stderr
    for field in ("Status:", "Framework:", "Primary cause:", "Contributing factors:", "Evidence:", "Root cause:", "Top fixes:", "Decision:", "Confidence:", "Next command(s):"):
        assert field in proc.stdout
    assert report is not None
    jsonschema.validate(report, SCHEMA)
    for key in ("decision", "run_status", "primary_cause", "primary_cause_confidence", "contributing_factors", "evidence", "root_cause", "fixes", "findings", "target", "framework", "created_at", "tool"):
        assert key in report
    assert report["primary_cause"] == "nan-inf"
    assert report["framework"] == "pytorch" and report["framework_source"] == "given"
    assert any(f["severity"] == "blocker" for f in report["findings"])


def test_json_format_prints_the_same_report(cli):
    proc, report = cli(str(NAN_LOG), "--format", "json")
    assert proc.returncode == 0
    printed = json.loads(proc.stdout)
    assert printed["primary_cause"] == report["primary_cause"] == "nan-inf"


def test_pasted_traceback_from_stdin(cli):
    text = (ROOT / "tests/real-logs/061-msfreb-save-model-unexpected-kwarg-after-3-days/train.log").read_bytes()
    proc, report = cli("--traceback", stdin=text)
    assert proc.returncode == 0, proc.stderr
    assert report["target_kind"] == "traceback"
    assert report["primary_cause"] in ("io-checkpoint", "config-error")


def test_fail_on_nogo_exit_code(cli):
    proc, report = cli(str(NAN_LOG), "--fail-on-nogo")
    assert report["decision"] == "NO-GO" and proc.returncode == 1


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "missing.log", "no file"),
        (lambda d: d, None),  # an empty directory: diagnosed as insufficient evidence, not an error
    ],
)
def test_missing_path_and_empty_directory(tmp_path, make, message):
    target = make(tmp_path)
    proc = run_cli("check-failed-run", str(target), "--out-dir", str(tmp_path / "o"))
    assert "Traceback" not in proc.stderr
    if message:
        assert proc.returncode == 2 and message in proc.stderr
    else:
        assert proc.returncode == 0
        assert "Insufficient evidence" in proc.stdout and "no log files found" in proc.stdout
        assert "Decision: NO-GO" in proc.stdout


def test_empty_binary_and_invalid_utf8_files(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    binary = tmp_path / "model.log"
    binary.write_bytes(os.urandom(4096) + b"\x00" * 1000)
    bad = tmp_path / "bad.log"
    bad.write_bytes(b"step 1 loss 2.0\n\xff\xfe\xfd garbage \xc3\x28\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    for f, expect in ((empty, "is empty"), (binary, "not a text log")):
        proc = run_cli("check-failed-run", str(f), "--out-dir", str(tmp_path / "o"))
        assert proc.returncode == 0 and "Traceback" not in proc.stderr
        assert expect in proc.stdout
    proc = run_cli("check-failed-run", str(bad), "--out-dir", str(tmp_path / "o"), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["primary_cause"] == "oom"


def test_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    # a writer that never writes: opening the FIFO for reading would block forever
    proc = run_cli("check-failed-run", str(fifo), "--out-dir", str(tmp_path / "o"), timeout=30)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr


def test_single_100mb_line(tmp_path):
    big = tmp_path / "one-line.log"
    with open(big, "wb") as f:
        f.writelines(b"x" * (1024 * 1024) for _ in range(100))
        f.write(b" RuntimeError: CUDA error: an illegal memory access was encountered\n")
    proc = run_cli("check-failed-run", str(big), "--out-dir", str(tmp_path / "o"), "--format", "json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["primary_cause"] == "cuda-runtime"
    assert all(len(e["text"]) < 5000 for e in d["evidence"])


def test_usage_errors_are_one_line(tmp_path):
    proc = run_cli("check-failed-run", "--out-dir", str(tmp_path))
    assert proc.returncode == 2 and "nothing to diagnose" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("check-failed-run", str(NAN_LOG), "--last", "0")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_unwritable_out_dir_is_a_clear_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        proc = run_cli("check-failed-run", str(NAN_LOG), "--out-dir", str(ro / "sub"))
        if os.geteuid() == 0:
            pytest.skip("root can write anywhere")
        assert proc.returncode == 2 and "cannot" in proc.stderr
    finally:
        ro.chmod(0o700)


def test_the_framework_choices_are_the_reports_frameworks():
    """--framework takes every framework the report can name (models.Framework) but 'unknown'."""
    from ml_skills.cli_parser import FRAMEWORKS
    from ml_skills.models import Framework

    assert FRAMEWORKS == [f.value for f in Framework if f is not Framework.UNKNOWN]
