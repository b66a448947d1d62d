"""The examples in docs/ are real: the policy files load and decide as shown, the JSON report is
what the CLI writes for that example today."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import jsonschema
import pytest
from ml_skills.policy import rules

from .conftest import ROOT

sys.path.insert(0, str(ROOT))
from bench import refresh_transcripts as refresh

POLICY_DOC = (ROOT / "docs" / "policy.md").read_text()
REPORT_DOC = (ROOT / "docs" / "report.md").read_text()


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.DOTALL)


def _table(text: str, heading: str) -> list[list[str]]:
    """Rows of the first action table under a heading, cells stripped of backticks."""
    lines = text.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| action |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip().strip("`") for c in line.strip("|").split(" | ")])
    return rows


def test_policy_doc_shows_the_shipped_default_verbatim():
    assert _blocks(POLICY_DOC, "toml")[0] == rules.DEFAULT_POLICY.read_text()


@pytest.mark.parametrize("heading, name", [("## Tightening", "team-policy.toml"), ("## Loosening", "loosen.toml")])
def test_policy_doc_examples_decide_as_shown(tmp_path, monkeypatch, heading, name):
    body = _blocks(POLICY_DOC.split(heading, 1)[1], "toml")[0]
    (tmp_path / name).write_text(body)
    monkeypatch.chdir(tmp_path)
    policy = rules.load(name)
    rows = _table(POLICY_DOC, heading)
    assert len(rows) == 4
    for action, target, risk, allowed, rule in rows:
        v = policy.decide(action, target)
        assert (v.risk.value, "yes" if v.allowed else "no") == (risk, allowed), (action, target)
        # the doc's server ran with the file at another path: compare the rule with the path as this test wrote it
        assert v.rule == re.sub(r"/\S*/" + re.escape(name), name, rule), (action, target)


def test_report_doc_json_is_valid_and_matches_a_fresh_diagnosis(tmp_path):
    shown = json.loads(_blocks(REPORT_DOC, "json")[0])
    schema = json.loads((ROOT / "schemas" / "check-failed-run.schema.json").read_text())
    jsonschema.validate(shown, schema)
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "train.log", "--out-dir", str(tmp_path)],
                          cwd=ROOT / "examples" / "nan-late-batch", capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    fresh = json.loads((tmp_path / "check-failed-run.json").read_text())
    for key in ("target", "run_status", "primary_cause", "primary_cause_confidence", "ruled_out", "evidence", "root_cause",
                "decision", "decision_reason", "last_progress", "anomalies", "sources"):
        assert shown[key] == fresh[key], key
    assert shown["fixes"] == fresh["fixes"][: len(shown["fixes"])] and shown["findings"] == fresh["findings"][: len(shown["findings"])]
    ex = fresh["decisive_excerpt"]
    cut = len(ex["lines"]) - len(shown["decisive_excerpt"]["lines"])
    assert shown["decisive_excerpt"]["lines"] == ex["lines"][cut:] and shown["decisive_excerpt"]["start_line"] == ex["start_line"] + cut
    for a, b in zip(shown["trajectory"], fresh["trajectory"], strict=True):
        assert a["points"] == b["points"][: len(a["points"])] and {k: v for k, v in a.items() if k != "points"} == {
            k: v for k, v in b.items() if k != "points"}


@pytest.mark.parametrize("name", ["nan-late-batch", "oom-eager-loading"])
def test_example_transcript_is_what_the_cli_prints_today(name):
    """The README's printed report is the CLI's stdout on the example's bundled files, byte for byte
    (paths are relative, so nothing is normalised): a change in wording fails here until
    `python bench/refresh_transcripts.py` is re-run."""
    shown = refresh.shown_transcript((ROOT / "examples" / name / "README.md").read_text())
    assert shown.rstrip("\n") == refresh.bundled_transcript(name).rstrip("\n")


@pytest.mark.slow
def test_vertex_doc_outputs_are_what_the_cli_prints_today():
    """docs/vertex.md's nine outputs are deterministic (loopback fake, fixed ids, fixed --out-dir):
    re-running them must give the doc back unchanged, or `python bench/vertex_transcripts.py` is due."""
    from bench import vertex_transcripts

    doc = vertex_transcripts.DOC.read_text()
    assert vertex_transcripts.render(doc) == doc
