"""tools/list from a file written at build time; each tool is built from its function at its first call.

Building the tools is most of what the server does before its first answer beyond the SDK's own
import: importing every tool module (and the models and collectors they import) and having the SDK
generate each tool's argument and output JSON schemas from our pydantic models (issue 17). Those
schemas only change with the code, so `python -m ml_skills.gen` writes them to `tools.json` beside
this module (from `python -m ml_skills.mcp_tools.listing`, which builds every tool the ordinary
way), and the server lists its tools from that file. A listed tool imports its module and builds
the real SDK tool (strict arguments, deadline, roots: common.build) the first time it is called,
then hands every call to it. The file is checked against the code like every generated file
(tests/test_gen.py), and the served listing against an eager build (tests/mcp/test_tool_listing.py);
a missing or unreadable file, or one that names other tool modules, means building every tool
at start as before.
"""

from __future__ import annotations

import importlib
import json
import sys
from functools import cached_property
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations
from pydantic import ConfigDict, PrivateAttr

from ml_skills.mcp_tools.registry import TOOL_MODULES

LISTING = Path(__file__).with_name("tools.json")


class ListedTool(Tool):
    """A tool as tools/list shows it, read from the listing; the real tool is built at the first call."""

    model_config = ConfigDict(defer_build=True)  # made by model_construct only: its validator is never needed
    _where: tuple[str, str] = PrivateAttr(("", ""))
    _output: dict[str, Any] | None = PrivateAttr(None)
    _real: Tool | None = PrivateAttr(None)

    @cached_property
    def output_schema(self) -> dict[str, Any] | None:
        return self._output

    def real(self) -> Tool:
        """The tool built from its function (once): what every call runs."""
        if self._real is None:
            from ml_skills.mcp_tools.common import build

            module, function = self._where
            self._real = build(getattr(importlib.import_module(module), function))
        return self._real

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        return await self.real().run(arguments, context, convert_result=convert_result)


def _noop(**_: Any) -> None:  # a listed tool's `fn`; calls go through ListedTool.run
    return None


def describe(fn: Any, tool: Tool) -> dict[str, Any]:
    """One tool's entry in the listing: where its function is, and what tools/list shows of it."""
    return {"module": fn.__module__, "function": fn.__name__, "name": tool.name, "title": tool.title,
            "description": tool.description, "input_schema": tool.parameters, "output_schema": tool.output_schema,
            "annotations": tool.annotations.model_dump(mode="json", exclude_unset=True) if tool.annotations else None}


def listing_json() -> str:
    """The listing file's text, from every tool built the ordinary way (imports every tool module)."""
    from ml_skills.mcp_tools.common import build
    from ml_skills.mcp_tools.registry import tool_functions

    entries = [describe(fn, build(fn)) for fn in tool_functions()]
    return json.dumps({"modules": list(TOOL_MODULES), "tools": entries}, indent=1) + "\n"


def listed_tools(path: Path = LISTING) -> list[Tool] | None:
    """The tools as the listing file describes them; None when it is missing, unreadable or for other modules."""
    try:
        data = json.loads(path.read_text("utf-8"))
        if data.get("modules") != list(TOOL_MODULES):
            return None
        return [_listed(e) for e in data["tools"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _listed(e: dict[str, Any]) -> Tool:
    annotations = ToolAnnotations.model_validate(e["annotations"]) if e["annotations"] is not None else None
    t = ListedTool.model_construct(fn=_noop, name=e["name"], title=e["title"], description=e["description"],
                                   parameters=e["input_schema"], fn_metadata=None,  # type: ignore[arg-type] # run() uses the real tool's
                                   is_async=True, context_kwarg=None,
                                   annotations=annotations, icons=None, meta=None)
    t._where = (e["module"], e["function"])
    t._output = e["output_schema"]
    return t


if __name__ == "__main__":
    sys.stdout.write(listing_json())
