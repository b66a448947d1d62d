"""Which tool modules the server loads: one line per tool family.

A collector adds its thin tool module (a `TOOLS` list of `@tool` functions) and one line here.
Tool modules import their SDK (wandb, mlflow, google.cloud) inside the function that needs
it, never at module level, so listing tools never imports a heavy SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

TOOL_MODULES: tuple[str, ...] = (
    "ml_skills.mcp_tools.logs",
    "ml_skills.mcp_tools.scan",
    "ml_skills.mcp_tools.artifacts",
    "ml_skills.mcp_tools.diagnose",
    "ml_skills.mcp_tools.process",
    "ml_skills.mcp_tools.vertex",
    "ml_skills.mcp_tools.checks",
    "ml_skills.mcp_tools.trackers",
    "ml_skills.mcp_tools.tensorboard",
    "ml_skills.mcp_tools.remote",
    "ml_skills.mcp_tools.actions",
    "ml_skills.mcp_tools.grid",
)


def tool_functions() -> list[Callable[..., Any]]:
    fns: list[Callable[..., Any]] = []
    for name in TOOL_MODULES:
        fns.extend(importlib.import_module(name).TOOLS)
    return fns
