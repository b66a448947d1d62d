"""docs/tools.md: the tool reference, written from what the server really registers.

The server is built exactly as `ml-skills-mcp` builds it, then asked for its tools, resources
and prompts the way a client asks (tools/list, resources/list, prompts/list), so the page shows
what a client sees: names, descriptions, annotations, argument schemas and output schemas.
gen.py writes it from `python -m ml_skills.mcp_tools.reference` run as a child process (so the
generator imports no face), and `python -m ml_skills.gen --check` fails when it drifts.
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

import anyio

HEADER = """\
# MCP tool reference

Generated from the server's registered tools, resources and prompt (`server/ml_skills/mcp_tools/registry.py`,
`app.py`, `resources.py`) by `python -m ml_skills.gen`; do not edit by hand. It shows what a client
sees from `tools/list`, `resources/list` and `prompts/list`. How to install and connect the server:
[mcp.md](mcp.md); what request_action may do: [policy.md](policy.md); every field of the
diagnosis `diagnose` returns: [references/schemas.md](../references/schemas.md).

Every tool refuses unknown arguments, runs under the deadline given, and answers a bad call with
a one-line tool error that says what to do next. Evidence results carry `status` (`ok`,
`no_data`, `partial`, `error`), `truncated`, `redactions`, `stripped_chars`, `marker` and `notes`;
log text comes back fenced between `[data MARKER]` and `[/data MARKER]` with this call's random
marker.
"""

_HINTS = (("read_only_hint", "read-only"), ("destructive_hint", "destructive"),
          ("idempotent_hint", "idempotent"), ("open_world_hint", "open-world"))
_LIMITS = (("minLength", "length ≥ {}"), ("maxLength", "length ≤ {}"), ("minimum", "≥ {}"), ("maximum", "≤ {}"),
           ("exclusiveMinimum", "> {}"), ("exclusiveMaximum", "< {}"), ("minItems", "≥ {} items"), ("maxItems", "≤ {} items"),
           ("pattern", "matches `{}`"))


_SHARED = {"status", "truncated", "redactions", "stripped_chars", "marker", "notes"}
"""ToolResult's fields, described once in the header instead of in every table."""


def _listing() -> tuple[list[Any], list[Any], list[Any], Any]:
    from ml_skills.mcp_tools.app import build_parser, build_server

    mcp = build_server(build_parser().parse_args(["--audit-log", os.devnull]), listed=False)  # from the code, not tools.json
    return anyio.run(mcp.list_tools), anyio.run(mcp.list_resources), anyio.run(mcp.list_prompts), build_parser()


def _deadlines() -> dict[str, float]:
    from ml_skills.mcp_tools.registry import tool_functions

    return {fn.__name__: fn._ml_spec.deadline for fn in tool_functions()}  # type: ignore[attr-defined]


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _type(p: dict[str, Any], defs: dict[str, Any], enums: bool) -> str:
    """A JSON-schema type in a few words; enum types spelled out where the reader must pick a value."""
    if "$ref" in p:
        name = p["$ref"].rsplit("/", 1)[-1]
        d = defs.get(name, {})
        if enums and "enum" in d:
            return f"`{name}`: " + ", ".join(f"`{v}`" for v in d["enum"])
        return f"`{name}`"
    if "anyOf" in p or "oneOf" in p:
        alts = p.get("anyOf") or p["oneOf"]
        parts = [x for x in alts if x.get("type") != "null"]
        t = " or ".join(_type(x, defs, enums) for x in parts)
        return t + (" or null" if len(parts) < len(alts) else "")
    if "enum" in p:
        return "one of " + ", ".join(f"`{v}`" for v in p["enum"])
    if p.get("type") == "array":
        return f"list of {_type(p['items'], defs, enums)}" if "items" in p else "list"
    if p.get("type") == "object" and "additionalProperties" in p and isinstance(p["additionalProperties"], dict):
        return f"map of {_type(p['additionalProperties'], defs, enums)}"
    return str(p.get("type", "any"))


def _limits(p: dict[str, Any]) -> str:
    found = [fmt.format(p[k]) for k, fmt in _LIMITS if k in p]
    for alt in p.get("anyOf", []):
        found += [fmt.format(alt[k]) for k, fmt in _LIMITS if k in alt]
    return ", ".join(found)


def _params(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> list[str]:
    props = schema.get("properties", {})
    if not props:
        return ["No arguments.", ""]
    req = set(schema.get("required", []))
    defs = schema.get("$defs", defs or {})
    rows = ["| argument | type | required / default | limits | meaning |", "|---|---|---|---|---|"]
    variants: list[tuple[str, str]] = []
    for name, p in props.items():
        if "const" in p:
            rows.append(f"| `{name}` | `{json.dumps(p['const'])}` | required |  | {_cell(p.get('description', ''))} |")
            continue
        default = "required" if name in req else f"default `{json.dumps(p.get('default'))}`"
        rows.append(f"| `{name}` | {_cell(_type(p, defs, True))} | {default} | {_cell(_limits(p))} | {_cell(p.get('description', ''))} |")
        variants += [(name, ref) for ref in _refs(p) if "properties" in defs.get(ref, {})]
    rows.append("")
    for name, ref in variants:  # a typed object argument (request_action's action): each shape in full
        d = defs[ref]
        rows += [f"`{name}` as `{ref}`: {_cell(d.get('description', ''))}", ""] + _params(d, defs)
    return rows


def _outputs(schema: dict[str, Any] | None) -> list[str]:
    if not schema:
        return ["No structured output.", ""]
    defs = schema.get("$defs", {})
    props = schema.get("properties", {})
    shared = _SHARED <= set(props)
    title = f"Output (`{schema.get('title', 'object')}`" + (", with the shared evidence fields `status` … `notes`):" if shared else "):")
    rows = [title, "", "| field | type | meaning |", "|---|---|---|"]
    nested: dict[str, list[str]] = {}
    for name, p in props.items():
        if shared and name in _SHARED:
            continue
        meaning = p.get("description") or next((defs[r].get("description", "") for r in _refs(p) if r in defs), "")
        rows.append(f"| `{name}` | {_cell(_type(p, defs, False))} | {_cell(meaning)} |")
        for ref in _refs(p):
            d = defs.get(ref, {})
            if "properties" in d and ref not in nested:
                nested[ref] = list(d["properties"])
    rows.append("")
    for ref, fields in nested.items():
        rows.append(f"- `{ref}` fields: " + ", ".join(f"`{f}`" for f in fields))
    return rows + ([""] if nested else [])


def _refs(p: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if "$ref" in p:
        out.append(p["$ref"].rsplit("/", 1)[-1])
    for alt in p.get("anyOf", []) + p.get("oneOf", []):
        out += _refs(alt)
    if "items" in p:
        out += _refs(p["items"])
    return out


def _yes(flag: bool | None) -> str:
    return "yes" if flag else "no"


def _server_section(parser: Any) -> list[str]:
    from ml_skills.mcp_tools.app import INSTRUCTIONS

    rows = ["## The server", "", "`ml-skills-mcp` options:", "", "| option | default | meaning |", "|---|---|---|"]
    for a in parser._actions:
        if not a.option_strings or a.dest in ("help", "version"):
            continue
        arg = "|".join(a.choices) if a.choices else a.metavar or "DIR" if "dir" in a.dest else a.metavar or a.dest.upper()
        opt = "`" + " ".join([*a.option_strings, arg] if a.nargs != 0 else a.option_strings) + "`"
        default = "" if a.default in (None, [], False) else f"`{a.default}`"
        rows.append(f"| {_cell(opt)} | {default} | {_cell(a.help or '')} |")
    return rows + ["", "Instructions the server sends at initialization:", "", f"> {_cell(INSTRUCTIONS)}", ""]


def markdown() -> str:
    tools, resources, prompts, parser = _listing()
    deadline = _deadlines()
    lines = [HEADER, *_server_section(parser), "## Tools at a glance", "",
             "| tool | title | " + " | ".join(w for _, w in _HINTS) + " | deadline |",
             "|---|---|" + "---|" * len(_HINTS) + "---|"]
    for t in tools:
        a = t.annotations
        flags = " | ".join(_yes(getattr(a, k)) for k, _ in _HINTS)
        lines.append(f"| [`{t.name}`](#{t.name}) | {_cell(t.title or '')} | {flags} | {deadline[t.name]:g} s |")
    lines.append("")
    for t in tools:
        a = t.annotations
        lines += [f"## {t.name}", "", f"**{t.title}**" if t.title else "", "", inspect.cleandoc(t.description or ""), "",
                  "Annotations: " + ", ".join(f"{w} {_yes(getattr(a, k))}" for k, w in _HINTS) + f"; deadline {deadline[t.name]:g} s.", ""]
        lines += _params(t.input_schema)
        lines += _outputs(t.output_schema)
    lines += ["## Resources", "", "| URI | name | type | what it holds |", "|---|---|---|---|"]
    lines += [f"| `{r.uri}` | {r.name} | {r.mime_type} | {_cell(r.description or '')} |" for r in resources]
    lines += ["", "## Prompts", ""]
    for p in prompts:
        args = ", ".join(f"`{x.name}`{'' if x.required else ' (optional)'}" for x in p.arguments or []) or "none"
        lines += [f"- `{p.name}` ({p.title}): {_cell(p.description or '')} Arguments: {args}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.buffer.write(markdown().encode("utf-8"))
