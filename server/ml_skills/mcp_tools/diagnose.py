"""diagnose: the whole engine on a log or run directory; writes check-failed-run.json into the out dir."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ml_skills.engine.pipeline import DiagnoseRequest
from ml_skills.engine.pipeline import diagnose as run_engine
from ml_skills.mcp_tools.common import WRITES_REPORT, ToolResult, config, roots, tool
from ml_skills.models import Diagnosis, EvidenceStatus, Framework, Task
from ml_skills.render import json_report
from ml_skills.safety.paths import confine, confine_new
from ml_skills.safety.quoting import fence, new_marker, strip_invisible


class DiagnoseResult(ToolResult):
    report_path: str = Field(description="Where check-failed-run.json was written.")
    excerpt: str = Field("", description="The decisive lines of the log, fenced as quoted data.")
    diagnosis: Diagnosis


def _strip_all(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return strip_invisible(value)
    if isinstance(value, list):
        pairs = [_strip_all(v) for v in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        pairs2 = {k: _strip_all(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs2.items()}, sum(n for _, n in pairs2.values())
    return value, 0


@tool(title="Diagnose a failed run", annotations=WRITES_REPORT, deadline=300.0)
def diagnose(
    target: Annotated[str, Field(min_length=1, max_length=4096, description="Log file or run directory, inside the allowed roots.")],
    artifacts: Annotated[str | None, Field(max_length=4096, description="Artifact directory to inventory alongside a log.")] = None,
    framework: Annotated[Framework | None, Field(description="Narrow checks to a framework (default: detected).")] = None,
    task: Annotated[Task | None, Field(description="Tune expectations for the task.")] = None,
    last: Annotated[int, Field(ge=1, le=100_000, description="Lines of the tail kept for context.")] = 500,
    out_dir: Annotated[str | None, Field(max_length=4096, description="Where check-failed-run.json goes (default: the server's --out-dir).")] = None,
) -> DiagnoseResult:
    """Run the whole diagnosis engine on a target and return the structured diagnosis: run status,
    primary cause with confidence, ruled-out classes, root cause, ranked fixes with risk levels and
    GO / NO-GO. Also writes check-failed-run.json and returns its path."""
    r = roots()
    t = confine(target, r, want="any")
    a = str(confine(artifacts, r, want="dir")) if artifacts else None
    out = confine_new(out_dir, r) if out_dir else config().out_dir
    d = run_engine(DiagnoseRequest(target=str(t), artifacts=a, framework=framework, task=task, last=last))
    cleaned, stripped = _strip_all(d.model_dump(mode="json"))
    d = Diagnosis.model_validate(cleaned)
    path = json_report.write(d, out)
    marker = new_marker()
    ex = d.decisive_excerpt
    f = fence(ex.lines, marker=marker, label=f"{ex.source} from line {ex.start_line}") if ex else None
    status = EvidenceStatus.OK if d.primary_cause is not None else EvidenceStatus.PARTIAL
    return DiagnoseResult(status=status, redactions=d.redactions, stripped_chars=stripped, marker=marker, report_path=str(path),
                          excerpt=f.text if f else "", truncated=bool(f and f.truncated), diagnosis=d)


TOOLS = [diagnose]
