"""The brief's size cap on the parts asked for cuts lists to the items that fit and says so; nothing is dropped silently.

The diagnosis is the engine's, on a real log (examples/nan-late-batch, produced by really running
the lab script: 399 stable steps, then NaN).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.render import brief
from ml_skills.render.brief import Part

LOG = Path(__file__).resolve().parents[2] / "examples" / "nan-late-batch" / "train.log"


@pytest.fixture(scope="module")
def d():
    return diagnose(DiagnoseRequest(target=str(LOG), once=True))


def test_parts_asked_for_come_whole_under_the_cap(d):
    b, notes = brief.build(d, "/r/check-failed-run.json", "m" * 16, [Part.TRAJECTORY, Part.EXCERPT])
    assert notes == []
    assert b.detail["trajectory"] == d.model_dump(mode="json")["trajectory"]
    assert b.detail["excerpt"].startswith("[data mmmmmmmmmmmmmmmm]") and d.decisive_excerpt.lines[0] in b.detail["excerpt"]
    assert not any(x.startswith(("trajectory:", "excerpt:")) for x in b.left_out)


def test_the_cap_cuts_a_list_to_the_items_that_fit_and_says_so(d, monkeypatch):
    whole = d.model_dump(mode="json")["trajectory"]
    budget = brief.size(whole[0]) + 10
    monkeypatch.setattr(brief, "DETAIL_MAX_CHARS", budget)
    b, notes = brief.build(d, "/r/check-failed-run.json", "m" * 16, [Part.TRAJECTORY, Part.ANOMALIES])
    assert b.detail["trajectory"] == whole[:1] and len(whole) > 1
    assert notes[0].startswith(f"trajectory: 1 of {len(whole)} items kept by the {budget}-character cap")
    assert "trajectory.1" in notes[0]
    assert notes[1].startswith(f"anomalies: 0 of {len(d.anomalies)} items kept") and b.detail["anomalies"] == []


def test_a_value_that_is_not_a_list_is_left_out_whole_with_a_note(monkeypatch):
    monkeypatch.setattr(brief, "DETAIL_MAX_CHARS", 10)
    value, note = brief.cap("excerpt", "x" * 100, 10)
    assert value is None and note is not None and "102 characters, over the 10-character cap" in note
