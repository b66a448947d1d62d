"""stalled, for real: a live training process whose DataLoader deadlocks (fork under a held lock).

The process stays alive and prints nothing more; the diagnosis must find the hang from the
log's last progress time against the run's own step cadence, and must not call a run that is
still making progress stalled.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path

from ml_skills.engine.analyse.lastprogress import STALL_MIN_SECONDS

from tests.lab.harness import start_live

PROGRESS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ INFO epoch \d+ step (\d+) loss")


def _progress(log: Path) -> list[tuple[int, datetime, int]]:
    """(line number, time, step) of every progress line the real run wrote."""
    out = []
    for i, line in enumerate(log.read_text(errors="replace").splitlines(), start=1):
        if m := PROGRESS.match(line):
            out.append((i, datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S"), int(m[2])))
    return out


def test_deadlocked_loader_is_found_from_the_last_progress_time(tmp_path, cli):
    live = start_live("stalled_loader", tmp_path / "run")
    try:
        deadline = time.monotonic() + 90
        while len(_progress(live.log)) < 4:
            assert live.proc.poll() is None and time.monotonic() < deadline, live.log.read_text()
            time.sleep(0.2)
        # while it still makes progress, nothing says stalled
        proc, early = cli(str(live.log))
        assert proc.returncode == 0, proc.stderr
        assert early["primary_cause"] != "stalled" and early["run_status"] != "hung"

        # wait until the log has been quiet for the no-progress window (the deadlock comes at epoch 3)
        deadline = time.monotonic() + 120
        while time.time() - live.log.stat().st_mtime < STALL_MIN_SECONDS + 1:
            assert time.monotonic() < deadline, "the scenario never stopped making progress"
            time.sleep(0.5)
        assert live.proc.poll() is None, "the hung process must still be alive"

        last_line, _, last_step = _progress(live.log)[-1]
        proc, rep = cli(str(live.log))
        assert proc.returncode == 0, proc.stderr
        assert rep["primary_cause"] == "stalled"
        assert rep["run_status"] == "hung"
        assert rep["root_cause"]["proximate_line"]["line_no"] == last_line
        assert f"step {last_step}" in rep["root_cause"]["proximate"]
        assert "no progress for" in rep["root_cause"]["root"] and "step cadence" in rep["root_cause"]["root"]
        assert rep["last_progress"]["line_no"] == last_line
        assert any(a["kind"] == "no-progress" for a in rep["anomalies"])
        top = rep["fixes"][0]
        assert top["fix_id"] == "dump-stacks" and top["risk"] == "safe"
        assert "blocking call" in top["validation"]
        assert any("py-spy dump --pid" in c for c in rep["next_commands"])
        assert rep["decision"] == "NO-GO"

        # the same hang found from the process: alive, idle, its open log not written for a long time
        proc, by_pid = cli("--pid", str(live.proc.pid))
        assert proc.returncode == 0, proc.stderr
        assert by_pid["target_kind"] == "pid"
        assert by_pid["primary_cause"] == "stalled" and by_pid["run_status"] == "hung", proc.stdout
        assert by_pid["root_cause"]["proximate_line"]["line_no"] == last_line
    finally:
        live.stop()
    assert live.proc.returncode is not None
