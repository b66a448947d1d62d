"""`--format json` is compact unless `--pretty`, and `--fields` picks parts of it: a shell user never needs Python.

Real child processes of the `ml-skills` entry point on a real log (examples/nan-late-batch: a NaN
after 399 stable steps, produced by really running the script in tests/lab).
"""

from __future__ import annotations

import json

import pytest

from .conftest import ROOT, run_cli

LOG = ROOT / "examples" / "nan-late-batch" / "train.log"


def test_json_is_one_compact_line_and_pretty_is_the_same_object(cli):
    compact, report = cli(str(LOG), "--format", "json")
    pretty, _ = cli(str(LOG), "--format", "json", "--pretty")
    assert compact.returncode == pretty.returncode == 0, compact.stderr + pretty.stderr
    assert compact.stdout.count("\n") == 1 and compact.stdout.startswith('{"schema_version":"1","tool":{')
    assert pretty.stdout.count("\n") > 100
    a, b = json.loads(compact.stdout), json.loads(pretty.stdout)
    a.pop("created_at"), b.pop("created_at"), report.pop("created_at")
    assert a == b == report
    assert len(compact.stdout) < len(pretty.stdout) * 0.7


def test_fields_print_the_named_parts_of_the_report(cli):
    proc, report = cli(str(LOG), "--fields", "primary_cause,decision,root_cause.root,fixes.risk,fixes.0.action,trajectory.name")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1
    got = json.loads(proc.stdout)
    assert list(got) == ["primary_cause", "decision", "root_cause.root", "fixes.risk", "fixes.0.action", "trajectory.name"]
    assert got["primary_cause"] == report["primary_cause"] == "nan-inf"
    assert got["decision"] == report["decision"]
    assert got["root_cause.root"] == report["root_cause"]["root"]
    assert got["fixes.risk"] == [f["risk"] for f in report["fixes"]]
    assert got["fixes.0.action"] == report["fixes"][0]["action"]
    assert got["trajectory.name"] == [s["name"] for s in report["trajectory"]]
    pretty, _ = cli(str(LOG), "--fields", "primary_cause", "--pretty")
    assert pretty.stdout == '{\n  "primary_cause": "nan-inf"\n}\n'


@pytest.mark.parametrize("fields, says", [
    ("primary_cause,bogus", "unknown field 'bogus': the report's top-level fields are schema_version, tool, created_at"),
    ("primary_cause.class", "unknown field 'primary_cause.class': primary_cause is a string, with no field 'class'"),
    ("root_cause.why", "root_cause has no field 'why'; its fields are proximate, proximate_line, root, contributing"),
    ("fixes.40", "fixes has 5 item(s)"),
    ("a,,b", "--fields takes field names separated by commas"),
    # a user trial asked for `status` fifteen times over, reading past the list (now an alias): the nearest name comes first
    ("run_stat", "unknown field 'run_stat' (did you mean run_status?): the report's top-level fields are"),
    ("root_cause.proximat", "unknown field 'root_cause.proximat' (did you mean proximate?): root_cause has no field"),
])
def test_unknown_fields_are_one_line_errors_that_list_what_exists(tmp_path, fields, says):
    proc = run_cli("check-failed-run", str(LOG), "--out-dir", str(tmp_path / "o"), "--fields", fields)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("ml-skills: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_words_people_use_for_the_status_and_the_class_are_read_as_those_fields(cli):
    """Two user trials (the fifteenth and the eighteenth) asked for `status` over and over: the brief an assistant is given
    says status and class. They name run_status and primary_cause, and are answered under those names."""
    proc, report = cli(str(LOG), "--fields", "status,class,root_cause.root")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {"run_status": report["run_status"], "primary_cause": "nan-inf", "root_cause.root": report["root_cause"]["root"]}


def test_an_unknown_top_level_field_is_refused_before_the_diagnosis_runs(tmp_path):
    proc = run_cli("check-failed-run", str(LOG), "--out-dir", str(tmp_path / "o"), "--fields", "bogus")
    assert proc.returncode == 2 and "primary_cause" in proc.stderr and "trajectory" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_fields_with_text_format_is_refused(tmp_path):
    proc = run_cli("check-failed-run", str(LOG), "--out-dir", str(tmp_path / "o"), "--fields", "primary_cause", "--format", "text")
    assert proc.returncode == 2 and "--fields prints JSON" in proc.stderr
