"""No function in the package is over 80 lines (its `def` line to its last line), save the few on ALLOWED that are
not split yet. The allow-list can only shrink: a listed function may not grow past the length recorded here, and
one that has been split under the limit must leave the list."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "ml_skills"
LIMIT = 80

# "module path:qualified name": its length when it was listed; empty since every function of issue 16 was split
ALLOWED: dict[str, int] = {}


def lengths() -> dict[str, int]:
    """Every function and method of the package (nested ones too) -> its length in lines."""
    found: dict[str, int] = {}

    def walk(node: ast.AST, module: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                found[f"{module}:{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                walk(child, module, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, module, prefix + child.name + ".")

    for path in sorted(PACKAGE.rglob("*.py")):
        walk(ast.parse(path.read_text(encoding="utf-8")), path.relative_to(PACKAGE).as_posix(), "")
    return found


def test_no_function_is_over_80_lines_save_the_listed_ones() -> None:
    long = {name: n for name, n in lengths().items() if n > LIMIT and name not in ALLOWED}
    assert not long, f"over {LIMIT} lines: split these into named steps: {long}"


def test_the_allow_list_only_shrinks() -> None:
    now = lengths()
    grown = {name: (now[name], cap) for name, cap in ALLOWED.items() if name in now and now[name] > cap}
    assert not grown, f"listed functions grew past their recorded length (now, recorded): {grown}"
    done = sorted(name for name in ALLOWED if now.get(name, 0) <= LIMIT)
    assert not done, f"now {LIMIT} lines or fewer (or gone): remove them from ALLOWED: {done}"
