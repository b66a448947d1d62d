"""The house's layers, checked from the source with `ast`, so the one-way flow stays true (issue 16).

    models/errors/safety/catalog/diskcache/dbcache <- collectors <- engine <- policy <- render <- checks <- cli/mcp_tools/grid <- gen

A module may import its own layer or a lower one, never a higher one. Every import counts: at the
top, inside a function, under `if TYPE_CHECKING:`, and a module named in a string the code loads
(`importlib.import_module("...")`, a "module:function" entry such as pipeline.COLLECTORS, a module name in
mcp_tools/registry.TOOL_MODULES); not the MODULE of a `python -m MODULE` child process, which imports
nothing into this one (gen.py reads the server's tool list that way, as a client would).
On top of the order, the "never" arrows of /work/shared/house/layers.json that the order alone
would allow: checks never render; the faces never import the doc generator, nor it them. And the
packages import each other in no cycle.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "ml_skills"

# unit -> rank; a unit is a top-level module or package of ml_skills
RANK = {
    "__init__": 0, "models": 0, "errors": 0, "lazyre": 0, "safety": 0, "catalog": 0, "targets": 0,
    "grid.models": 0,  # triage-runs' boundary types (its report), beside models.py
    "modelkit": 0, "plainmodel": 0, "plainjson": 0,  # where models.py gets BaseModel: pydantic, or the CLI's plain classes
    "calltime": 0,  # the deadline of the MCP call a thread works for: collectors check it, the server sets it
    "diskcache": 0, "dbcache": 0,  # the cache directory's sealed files and Hyperscan databases: catalog, engine and safety use them
    "collectors": 1,
    "engine": 2,
    "policy": 3,
    "render": 4,
    "checks": 5,
    "cli": 6, "cli_parser": 6, "mcp_tools": 6, "grid": 6,
    "gen": 7,
}
NEVER = {("checks", "render"): "checks return results; faces render",
         ("gen", "mcp_tools"): "the generator reads the server as a client does, in a child process",
         ("gen", "cli"): "the generator imports no face",
         ("mcp_tools", "gen"): "the running server never imports the doc generator",
         ("cli", "gen"): "the CLI never imports the doc generator"}
_NAMED = re.compile(r"^ml_skills(\.\w+)+(:\w+)?$")  # a module (or "module:function") named for importlib to load later


def _loads_by_name(call: ast.Call) -> bool:
    """importlib.import_module(...), import_module(...) or __import__(...)."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in ("import_module", "__import__")


SPLIT = {"grid": {"models"}}  # packages whose named modules stand in a layer of their own


def _unit(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "ml_skills":
        return None
    if len(parts) > 2 and parts[2] in SPLIT.get(parts[1], ()):
        return f"{parts[1]}.{parts[2]}"
    return parts[1] if len(parts) > 1 else "__init__"


def _module_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, module: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every ml_skills module this file (the module `module`, default: its place) imports or loads by name."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    here = (module or _module_of(path)).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out: list[tuple[int, str]] = []
    child = {id(b) for n in ast.walk(tree) if isinstance(n, (ast.List, ast.Tuple))
             for a, b in zip(n.elts, n.elts[1:]) if isinstance(a, ast.Constant) and a.value == "-m"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..engine import y
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names if _unit(f"{base}.{a.name}") and base == "ml_skills"]
        elif isinstance(node, ast.Call) and _loads_by_name(node) and node.args and isinstance(node.args[0], ast.Constant):
            out.append((node.lineno, str(node.args[0].value)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAMED.match(node.value) and id(node) not in child:
            out.append((node.lineno, node.value.split(":")[0]))
    return [(line, m) for line, m in out if _unit(m) is not None]


@cache
def _edges() -> list[tuple[str, str, str]]:
    """(from unit, to unit, where) for every import across units."""
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _unit(_module_of(path))
        assert src in RANK, f"{path} is in no layer: add its unit to RANK"
        for line, mod in imports(path):
            dst = _unit(mod)
            if dst != src:
                edges.append((src, dst, f"{path.relative_to(PACKAGE.parent)}:{line} imports {mod}"))
    return edges


def test_every_unit_has_a_layer():
    units = {_unit(_module_of(p)) for p in PACKAGE.rglob("*.py")}
    assert units <= set(RANK), units - set(RANK)


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    up = [f"{where} ({src} is layer {RANK[src]}, {dst} is layer {RANK[dst]})"
          for src, dst, where in _edges() if dst in RANK and RANK[dst] > RANK[src]]
    assert not up, "imports that run up the layers:\n" + "\n".join(up)


def test_no_never_arrow():
    broken = [f"{where}: {NEVER[(src, dst)]}" for src, dst, where in _edges() if (src, dst) in NEVER]
    assert not broken, "\n".join(broken)


def test_the_units_import_each_other_in_no_cycle():
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, _ in _edges():
        graph[src].add(dst)
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(u: str, stack: list[str]) -> bool:
        state[u] = 1
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                cycle.extend([*stack[stack.index(v):], v] if v in stack else [u, v])
                return True
            if state.get(v) is None and visit(v, [*stack, v]):
                return True
        state[u] = 2
        return False

    assert not any(state.get(u) is None and visit(u, [u]) for u in sorted(RANK)), " -> ".join(cycle)


def test_the_checker_sees_hidden_imports(tmp_path):
    """The parser counts what the old code hid: a function-level import, a TYPE_CHECKING one, a registry string."""
    f = tmp_path / "probe.py"  # parsed as if it were ml_skills/collectors/probe.py, never imported
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ml_skills.engine.pipeline import DiagnoseRequest\n"
           "def f():\n    from ml_skills.render.progress import wait\n"
           "SPEC = {'x': 'ml_skills.engine.read.scan:scan_text'}\n"
           "import importlib\nM = importlib.import_module('ml_skills.checks.watch')\nNAMES = ('ml_skills.cli',)\n"
           "CHILD = ['python', '-m', 'ml_skills.gen']\n")
    f.write_text(src + "from ..engine import scan\n")
    found = {m for _, m in imports(f, "ml_skills.collectors.probe")}
    assert {"ml_skills.engine.pipeline", "ml_skills.render.progress", "ml_skills.engine.read.scan", "ml_skills.checks.watch",
            "ml_skills.engine", "ml_skills.cli"} <= found
    assert "ml_skills.gen" not in found  # a child process, not an import
