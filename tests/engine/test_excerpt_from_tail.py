"""The excerpt around a line the scan kept in its tail is taken from that tail, not by counting the file's lines from
its start again: a reading of the tail has no recorded byte offset (DeepSpeed's 'step=N, skipped=N', a closing summary),
and a 70 MB log of such lines read itself twice more for the report (2.35 s against 0.79 s; the twenty-sixth round's
note). The lines are the same ones, redacted the same way, as the file's own window around the line."""

from __future__ import annotations

from pathlib import Path

from ml_skills.collectors import logfile
from ml_skills.engine.read import excerpts
from ml_skills.engine.read.scan import scan_log
from ml_skills.safety.redact import redact_lines

ROOT = Path(__file__).resolve().parents[2]


def _long_log(tmp_path: Path) -> Path:
    """A real run's log thirty times over (12,000 lines): longer than the tail the scan keeps. A reader's test: the
    lines' meaning is not diagnosed here."""
    log = tmp_path / "train.log"
    log.write_bytes((ROOT / "examples" / "nan-late-batch" / "train.log").read_bytes() * 30)
    return log


def test_an_excerpt_from_the_tail_is_the_files_own_window(tmp_path: Path) -> None:
    log = _long_log(tmp_path)
    ev = scan_log(log)
    assert ev.tail is not None and ev.tail.start_line < ev.total_lines - 60
    for line_no in (ev.tail.start_line + 20, ev.total_lines - 30, ev.total_lines - 5):
        from_tail = excerpts.excerpt_around(ev, line_no, 20, 20)
        first, lines = logfile.window(log, line_no, 20, 20)
        assert (from_tail.start_line, from_tail.lines) == (first, redact_lines(lines)), line_no


def test_a_line_above_the_tail_is_still_read_from_the_file(tmp_path: Path) -> None:
    log = _long_log(tmp_path)
    ev = scan_log(log)
    assert ev.tail is not None and ev.tail.start_line > 30
    ex = excerpts.excerpt_around(ev, 25, 5, 5)
    first, lines = logfile.window(log, 25, 5, 5)
    assert (ex.start_line, ex.lines) == (first, redact_lines(lines))
