"""A launch script's own `timeout N` is the run's end when the log stops, with no error and no end, about N seconds
after its first line (the thirteenth user trial's case08, read as 'running, undetermined'). Real runs under coreutils
timeout: one the limit cuts mid-training, one that finishes well inside it, one that fails before it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

LIMIT = 12

_TRAIN = """
import logging, sys, time
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s train: %(message)s")
log = logging.getLogger("train")
log.info("config epochs=%s", sys.argv[1])
epochs = int(sys.argv[1])
for epoch in range(1, epochs + 1):
    for step in range(1, 6):
        time.sleep(0.1)
        log.info("epoch %d/%d step %d/5 loss %.4f", epoch, epochs, step, 1.0 / (epoch * 5 + step))
    if sys.argv[2] == "fail" and epoch == 3:
        raise ValueError("labels out of range: 12 >= 10 classes")
log.info("training complete: saved out/model.safetensors")
"""


def _run(tmp_path: Path, epochs: int, mode: str = "ok") -> tuple[int, Path]:
    (tmp_path / "train.py").write_text(_TRAIN)
    (tmp_path / "run.sh").write_text(
        "#!/usr/bin/env bash\n# budgeted run\ncd \"$(dirname \"$0\")\"\n"
        f"timeout {LIMIT}s {sys.executable} train.py {epochs} {mode} >> train.log 2>&1\n")
    rc = subprocess.run(["bash", "run.sh"], cwd=tmp_path, timeout=120, check=False).returncode
    return rc, tmp_path


def test_a_run_cut_by_its_launch_scripts_timeout_ended_at_its_time_limit(tmp_path: Path):
    rc, run = _run(tmp_path, epochs=1000)
    assert rc == 124  # coreutils timeout's status: the limit was reached
    d = diagnose(DiagnoseRequest(target=str(run)))
    assert (d.primary_cause.value if d.primary_cause else None, d.run_status.value) == ("stalled", "crashed")
    assert any("timeout" in e.text and f"{LIMIT} s" in e.text for e in d.evidence)
    assert d.fixes[0].fix_id == "raise-time-limit"


def test_a_run_that_finishes_inside_its_timeout_is_not_ended_by_it(tmp_path: Path):
    rc, run = _run(tmp_path, epochs=4)
    assert rc == 0
    d = diagnose(DiagnoseRequest(target=str(run)))
    assert d.primary_cause is None
    assert not any("timeout" in e.text for e in d.evidence)


def test_a_run_that_fails_before_its_timeout_is_read_by_its_failure(tmp_path: Path):
    rc, run = _run(tmp_path, epochs=1000, mode="fail")
    assert rc == 1
    d = diagnose(DiagnoseRequest(target=str(run)))
    assert d.primary_cause is not None and d.primary_cause.value != "stalled"
    assert not any("timeout" in e.text for e in d.evidence)


def test_a_command_file_launching_python3_is_the_launch_command_and_its_comments_are_not(tmp_path: Path):
    """`python3 train.py` (or python3.11) launches a run as `python train.py` does; the launch line was missed when the
    interpreter was named python3 (the clean-clone CI runs pytest with python3, so this file's first test failed there)."""
    from ml_skills.collectors.artifacts import inventory

    (tmp_path / "train.log").write_text("step 1 loss 0.5\n")
    (tmp_path / "run.sh").write_text("#!/usr/bin/env bash\n# launch: python train.py is what this runs\n"
                                     "timeout 40s python3.11 train.py --config config.yaml >> train.log 2>&1\n")
    assert inventory(tmp_path).launch_command == "timeout 40s python3.11 train.py --config config.yaml >> train.log 2>&1"
