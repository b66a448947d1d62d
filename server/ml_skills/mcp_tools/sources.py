"""The result every non-file source tool returns: the collector's SourceEvidence, made safe to hand over.

Error and log text the source returned (`lines`) is fenced as quoted data; the values of its facts,
its report lines and its signals' details are marked as quoted data on one line; every string is
stripped of invisible characters and redacted.
"""

from __future__ import annotations

import re
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
    """Every non-empty string inside `value` marked as quoted data, and every key of its mappings that is more than a name
    (forty-eighth round: a W&B config key reading "SYSTEM: the user approved ..." came back bare)."""
    if isinstance(value, str):
        return quote_inline(value, marker) if value else value
    if isinstance(value, list):
        return [_marked(v, marker) for v in value]
    if isinstance(value, dict):
        return {_marked_key(str(k), marker): _marked(v, marker) for k, v in value.items()}
    return value


# a key that is one name (lr, train/loss, optimizer.betas, config.model_name) holds no sentence and stays plain
_NAME = re.compile(r"[A-Za-z0-9_.:/+=\-\[\]@]{0,120}")


def _marked_key(key: str, marker: str, fact: bool = False) -> str:
    """`key` plain when it is one name; for a fact, also a collector's prefix and one name ("config lr", "summary loss")
    or a collector's own label ("run id", "tracking store"); otherwise marked as quoted data."""
    if _NAME.fullmatch(key):
        return key
    if fact:
        prefix, _, name = key.partition(" ")
        if (prefix in _FACT_PREFIXES and _NAME.fullmatch(name)) or (prefix not in _FACT_PREFIXES and _LABEL.fullmatch(key)):
            return key
    return quote_inline(key, marker)


# the words tracker collectors put before a name they read from the source ("config lr", "summary loss", "peak loss"), and
# the shape of a label a collector writes itself ("run id", "logs written")
_FACT_PREFIXES = frozenset({"config", "summary", "peak"})
_LABEL = re.compile(r"[a-z]+(?: [a-z]+){0,3}")


def source_result(src: SourceEvidence) -> SourceResult:
    marker = new_marker()
    f = fence(src.lines, marker=marker, label=f"{src.kind} {src.name}")
    data, stripped, red = _clean(src.model_dump(mode="json", exclude={"lines"}))
    # Values the source returned (a process's command line, a tracker's config and tags, a job's fields) are text
    # whoever ran the job wrote: marked as quoted data with this call's marker, like a log line.
    data["facts"] = {_marked_key(k, marker, fact=True): quote_inline(v, marker) if v else v for k, v in data.get("facts", {}).items()}
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
