"""The registry of target kinds (targets.py) is the only list of them: every face is built from it."""

from __future__ import annotations

import argparse
import ast
import importlib
import re
from pathlib import Path

import anyio
import pytest
from ml_skills import targets
from ml_skills.cli_parser import build_parser
from ml_skills.engine import pipeline
from ml_skills.engine.pipeline import DiagnoseRequest
from ml_skills.mcp_tools.app import INSTRUCTIONS
from ml_skills.models import Diagnosis
from ml_skills.targets import TargetKind

from tests.conftest import run_cli
from tests.mcp.conftest import Server

PACKAGE = Path(targets.__file__).parent


def _flags(command: str) -> set[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {s for a in sub.choices[command]._actions for s in a.option_strings} | {
        a.dest for a in sub.choices[command]._actions if not a.option_strings}


def test_every_kind_is_a_flag_of_check_failed_run_and_of_watch_run_where_it_can_be_polled():
    check, watch = _flags("check-failed-run"), _flags("watch-run")
    for i in targets.INPUTS:
        name = i.flag or "target"
        assert name in check
        assert (name in watch) == i.watch, name


def test_every_kind_is_a_diagnose_parameter_and_every_reader_a_tool_through_a_real_client(tmp_path):
    async def go() -> dict:
        async with Server(tmp_path).client() as c:
            return {t.name: t for t in (await c.list_tools()).tools}

    tools = anyio.run(go)
    params = tools["diagnose"].input_schema["properties"]
    assert [i.field for i in targets.mcp_inputs()] == [p for p in params if p in {i.field for i in targets.INPUTS}]
    for i in targets.mcp_inputs():
        assert params[i.field]["description"] == i.description and i.phrase in tools["diagnose"].description
    assert set(targets.evidence_tools()) <= set(tools)


def test_the_instructions_name_every_kind_and_its_tool():
    for i in targets.mcp_inputs():
        assert i.phrase in INSTRUCTIONS
    for t in targets.evidence_tools():
        assert t in INSTRUCTIONS


def test_the_request_has_one_field_per_input_and_knows_each_kind_and_label(tmp_path):
    fields = set(DiagnoseRequest.model_fields)
    assert {i.field for i in targets.INPUTS} <= fields
    values = {TargetKind.LOG: str(tmp_path / "train.log"), TargetKind.DIRECTORY: str(tmp_path),
              TargetKind.SSH: "me@host:/runs/train.log", TargetKind.PID: 4242}
    for k in targets.KINDS:
        value = values.get(k.kind, f"x-{k.kind}")
        req = DiagnoseRequest(**{k.input.field: value})
        assert req.kind() is k.kind and req.label() == k.label.format(value)
    assert set(Diagnosis.model_json_schema()["$defs"]["TargetKind"]["enum"]) == {k.value for k in TargetKind}


def test_every_collector_named_in_the_registry_exists_and_only_those_are_looked_up():
    assert pipeline.COLLECTORS == {k.kind: f"ml_skills.collectors.{k.collector}:collect" for k in targets.KINDS if k.collector}
    assert pipeline.POLLING == {k.kind for k in targets.KINDS if k.waits}
    for spec in pipeline.COLLECTORS.values():
        mod, fn = spec.split(":")
        assert callable(getattr(importlib.import_module(mod), fn))


@pytest.mark.parametrize("command", ["check-failed-run", "watch-run"])
def test_the_one_target_messages_name_every_input(command, tmp_path):
    proc = run_cli(command, "--out-dir", str(tmp_path)) if command == "check-failed-run" else run_cli(command)
    assert proc.returncode == 2
    for i in targets.cli_inputs(watch=command == "watch-run"):
        assert i.noun in proc.stderr


_BY_FLAG = {i.flag: i.field for i in targets.INPUTS if i.flag}
_FLAG = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, _BY_FLAG)) + r")(?![\w-])")
_FIELDS = {i.field for i in targets.INPUTS} - {"target", "pid"}  # words too common to tell a list by


def _kinds_named(tree: ast.AST) -> set[str]:
    """The target inputs a module names by hand: flags in strings, fields read off a request or args, or passed by name."""
    named: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            named |= {_BY_FLAG[f] for f in _FLAG.findall(node.value)}
        elif isinstance(node, ast.Attribute) and node.attr in _FIELDS and isinstance(node.value, ast.Name) and node.value.id in (
                "req", "args", "request"):
            named.add(node.attr)
        elif isinstance(node, ast.keyword | ast.arg) and node.arg in _FIELDS:
            named.add(node.arg)
    return named


def test_no_module_lists_the_kinds_by_hand():
    """A module may name the one or two kinds it serves (a collector its flag, the grid its tracker runs); three or
    more is a hand-kept list, which belongs in targets.py."""
    lists = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "targets.py":
            continue
        named = _kinds_named(ast.parse(path.read_text()))
        if len(named) >= 3:
            lists[str(path.relative_to(PACKAGE))] = sorted(named)
    assert lists == {}
