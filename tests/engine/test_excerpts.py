"""Excerpts read back after the pass; what the scan remembers for them stays bounded in a
long-running MCP server that diagnoses one pasted traceback after another."""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine import excerpts, scan

CASE = next((Path(__file__).parents[1] / "corpus").glob("004-*/train.log"))


def test_remembered_texts_and_offsets_are_bounded(tmp_path):
    text = CASE.read_text(errors="replace")
    for i in range(excerpts.KEPT + 10):
        scan.scan_text(text, source=f"pasted-{i}")
        copy = tmp_path / f"run{i}.log"
        copy.write_text(text)
        scan.scan_log(copy)
    assert len(excerpts._text_cache) <= excerpts.KEPT and len(excerpts._byte_offsets) <= excerpts.KEPT
    newest = f"pasted-{excerpts.KEPT + 9}"
    log = scan.scan_text(text, source=newest)
    hit = log.hits[0] if log.hits else None
    assert hit is not None
    ex = excerpts.excerpt_from_tail(log, hit.line_no, 2, 2)
    assert ex is not None and hit.text.strip() in "\n".join(ex.lines)
