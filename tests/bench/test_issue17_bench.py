"""bench/issue17.py's own lines: the memory and tail lines on small logs, run for real in child processes, so the
script that states issue 17's figures cannot rot between the runs that quote it."""

from __future__ import annotations

import re
from pathlib import Path

from bench import issue17
from bench.run import Run


def test_memory_and_tail_lines_come_from_paired_child_processes(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    rows: list[tuple[str, str, str]] = []
    issue17._memory(tmp_path, "3M", rows)
    (_, rss, rss_verdict), (_, tail, tail_verdict) = rows
    big, small, delta = map(int, re.fullmatch(r"(\d+) MB against (\d+) MB \(([+-]\d+) MB\)", rss).groups())
    assert big - small == delta and small > 10  # a real process's peak RSS, not a placeholder
    assert rss_verdict == ("met" if delta <= 64 else "NOT MET")
    assert "(7 pairs)" in tail and tail_verdict.split()[0] in ("met", "NOT")
    assert not (tmp_path / "big.log").exists()  # the big log is deleted once measured


def test_a_line_is_judged_by_the_median_pair_not_by_its_best_pair() -> None:
    runs = [(Run(w, w, 0, ""), Run(1.0, 1.0, 0, "")) for w in (0.5, 1.2, 1.3)]
    _, figure, verdict = issue17._ratio_row("g", runs, "<= 1.0x", lambda m: m <= 1.0)
    assert verdict == "NOT MET (<= 1.0x)" and "A/B wall 1.200 (0.500-1.300)" in figure
