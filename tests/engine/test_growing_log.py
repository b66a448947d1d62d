"""A log still being written while it is scanned: the tail and the last progress point must carry
the line numbers the lines really have (the pass counts lines up to the size it started with)."""

from __future__ import annotations

import subprocess
import sys
import time

from ml_skills.engine.read import scan

WRITER = """
import sys
i = 0
with open(sys.argv[1], "a") as f:
    while True:
        f.write(f"step={i} loss={2.0 - i * 1e-7:.7f} grad_norm=0.9 lr=1.0e-04 throughput=120.5\\n")
        i += 1
        if i % 500 == 0:
            f.flush()
"""


def test_tail_line_numbers_of_a_log_that_grows_during_the_scan(tmp_path):
    log = tmp_path / "train.log"
    log.touch()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log)])
    try:
        deadline = time.monotonic() + 60
        while log.stat().st_size < 6 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.05)
        changed = None
        for _ in range(10):  # until the writer appends during a pass (nearly always the first)
            ev = scan.scan_log(log, last=50)
            if ev.changed:
                changed = ev
                break
        assert changed is not None, "the writer never appended during a scan"
    finally:
        writer.kill()
        writer.wait()
    lines = log.read_bytes().split(b"\n")
    number = {text: i + 1 for i, text in enumerate(lines)}  # every line is unique (its step)
    tail = changed.tail
    for k, text in enumerate(tail.lines):
        if text:  # a line cut at the size the pass started with is not a whole line of the file
            assert number.get(text.encode(), tail.start_line + k) == tail.start_line + k, (k, text)
    assert tail.start_line + len(tail.lines) - 1 == changed.total_lines
    lp = changed.trajectory.last_progress
    assert lp is not None and lp.line_no is not None
    line = lines[lp.line_no - 1].decode()
    if lp.line_no < changed.total_lines:  # the last counted line may be cut where the pass stopped reading
        assert line.startswith(f"step={int(lp.step)} ")
    else:  # cut where the pass stopped: its step may be cut too (seen once in CI: no step read from 'step=')
        assert line.startswith("step=") and (lp.step is None or line.startswith(f"step={int(lp.step)!s}")), (line[:80], lp)
