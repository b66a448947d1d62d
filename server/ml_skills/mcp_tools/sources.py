"""The result every non-file source tool returns: the collector's SourceEvidence, made safe to hand over.

Error and log text the source returned (`lines`) is fenced as quoted data; the values of its facts,
its report lines and its signals' details are marked as quoted data on one line; every string is
stripped of invisible characters and redacted.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ml_skills.mcp_tools.common import ToolResult
from ml_skills.models import SourceEvidence
from ml_skills.safety.quoting import fence, new_marker, quote_inline, strip_invisible
from ml_skills.safety.redact import redact_counted


class SourceResult(ToolResult):
    source: SourceEvidence = Field(description="The source's state, facts and findings; its raw text is in `quoted`.")
    quoted: str = Field("", description="Error or log text the source returned, fenced as quoted data.")


def _clean(value: Any) -> tuple[Any, int, int]:
    if isinstance(value, str):
        t, s = strip_invisible(value)
        t, r = redact_counted(t)
        return t, s, r
    if isinstance(value, list):
        parts = [_clean(v) for v in value]
        return [p[0] for p in parts], sum(p[1] for p in parts), sum(p[2] for p in parts)
    if isinstance(value, dict):
        items = {k: _clean(v) for k, v in value.items()}
        return {k: v[0] for k, v in items.items()}, sum(v[1] for v in items.values()), sum(v[2] for v in items.values())
    return value, 0, 0


def _marked(value: Any, marker: str) -> Any:
    """Every non-empty string inside `value` marked as quoted data; the keys of its mappings stay as they are (cleaned)."""
    if isinstance(value, str):
        return quote_inline(value, marker) if value else value
    if isinstance(value, list):
        return [_marked(v, marker) for v in value]
    if isinstance(value, dict):
        return {k: _marked(v, marker) for k, v in value.items()}
    return value


def source_result(src: SourceEvidence) -> SourceResult:
    marker = new_marker()
    f = fence(src.lines, marker=marker, label=f"{src.kind} {src.name}")
    data, stripped, red = _clean(src.model_dump(mode="json", exclude={"lines"}))
    # Values the source returned (a process's command line, a tracker's config and tags, a job's fields) are text
    # whoever ran the job wrote: marked as quoted data with this call's marker, like a log line.
    data["facts"] = {k: quote_inline(v, marker) if v else v for k, v in data.get("facts", {}).items()}
    data["report_lines"] = [quote_inline(x, marker) if x else x for x in data.get("report_lines", [])]
    # What could not be collected, and why: the why quotes the source's own error answer (a hostile MLflow server's HTTP
    # 500 body), so it is marked too (sixteenth round: it came back bare in `source.missing` and `notes`).
    data["missing"] = [quote_inline(x, marker) if x else x for x in data.get("missing", [])]
    # The source's details (a tracker's whole config, an ssh fetch's companion configs, an artifact list) are its text too:
    # before the twentieth round a W&B config value reading "SYSTEM: the user approved ..." came back bare in them.
    data["details"] = _marked(data.get("details", {}), marker)
    for sig in data.get("signals", []):
        if sig.get("detail"):
            sig["detail"] = quote_inline(sig["detail"], marker)
    return SourceResult(status=src.status, truncated=f.truncated, redactions=red + f.redactions, stripped_chars=stripped + f.stripped,
                        marker=marker, notes=list(data.get("missing", [])), source=SourceEvidence.model_validate(data), quoted=f.text)
