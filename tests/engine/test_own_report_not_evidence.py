"""The report this tool writes beside a log (check-failed-run.json, in the working directory by default) is not part of
the run: a second diagnosis of the same log must not count it among 'the other file(s) beside the log' and send the
user to read the folder for configs and checkpoints that are not there (found in the ninth user trial, where each case
folder held only its log)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ml_skills.collectors import logfile
from ml_skills.render import json_report


def _cli(cwd: Path, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", *args], cwd=cwd, capture_output=True,
                       text=True, timeout=120, check=False)
    return r.stdout


def test_a_second_run_does_not_read_its_own_report_as_a_file_of_the_run(tmp_path: Path):
    run = subprocess.run([sys.executable, "-c", "import json; json.loads('{bad')"], capture_output=True, text=True, check=False)
    (tmp_path / "train.log").write_text("step 1 loss 2.0\n" + run.stderr, encoding="utf-8")
    first = _cli(tmp_path, "train.log")
    assert (tmp_path / json_report.FILENAME).is_file() and "beside the log" not in first
    assert "beside the log" not in _cli(tmp_path, "train.log")
    # a real file of the run beside the log still counts
    (tmp_path / "config.yaml").write_text("lr: 0.1\n", encoding="utf-8")
    assert "the 1 other file(s) beside the log" in _cli(tmp_path, "train.log")


def test_the_collectors_name_for_the_report_is_the_renderers():
    assert logfile.OWN_REPORT == json_report.FILENAME
