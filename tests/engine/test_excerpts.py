"""Excerpts read back after the pass come from what the scan returned (LogEvidence's offsets and held
text), not from module state: two calls at once in a long-running MCP server, each on its own pasted
traceback under the same name ("pasted traceback"), each quote their own text."""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.read import excerpts, scan

CORPUS = Path(__file__).parents[1] / "corpus"
CASE = next(CORPUS.glob("004-*/train.log"))
OTHER = next(CORPUS.glob("001-*/train.log"))


def test_each_pasted_text_is_quoted_from_its_own_evidence():
    first = scan.scan_text(CASE.read_text(errors="replace"), source="pasted traceback")
    second = scan.scan_text(OTHER.read_text(errors="replace"), source="pasted traceback")  # the next call, same name
    hit = first.hits[0] if first.hits else None
    assert hit is not None
    ex = excerpts.excerpt_from_tail(first, hit.line_no, 2, 2)
    assert ex is not None and hit.text.strip() in "\n".join(ex.lines)
    assert second.held != first.held
    assert not [k for k, v in vars(excerpts).items() if isinstance(v, dict) and not k.startswith("__")], "no module-level caches"


def test_a_file_is_read_back_at_its_recorded_offset_and_only_while_it_is_the_file_scanned(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(CASE.read_bytes())
    ev = scan.scan_log(log)
    hit = ev.hits[-1]
    assert ev.offsets.get(hit.line_no) is not None and ev.inode == log.stat().st_ino
    ex = excerpts.excerpt_around(ev, hit.line_no, 2, 2)
    assert hit.text.strip() in "\n".join(ex.lines) and ex.start_line == hit.line_no - 2
    replaced = tmp_path / "new.log"  # rotated: a new file under the old name, its lines shifted by one
    replaced.write_bytes(b"a new first line\n" + CASE.read_bytes())
    replaced.replace(log)
    ex = excerpts.excerpt_around(ev, hit.line_no, 0, 0)
    assert ex.lines == [CASE.read_text(errors="replace").splitlines()[hit.line_no - 2]]  # counted, not sought at a stale offset
