"""diagnose: the whole engine on any target the CLI takes; writes check-failed-run.json into the out dir."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field

from ml_skills.engine.pipeline import DiagnoseRequest
from ml_skills.engine.pipeline import diagnose as run_engine
from ml_skills.errors import InputError
from ml_skills.mcp_tools.common import WRITES_REPORT, ToolResult, config, roots, tool, tracker_target
from ml_skills.models import Diagnosis, EvidenceStatus, Framework, Task
from ml_skills.render import json_report
from ml_skills.safety.paths import confine, confine_new
from ml_skills.safety.quoting import fence, new_marker, strip_invisible

MAX_PASTE = 4 * 1024 * 1024


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


_REMOTE = re.compile(r"^[^/\s@]+@[^/\s]+:/")  # user@host:/path, as the CLI reads it


@tool(title="Diagnose a failed run", annotations=WRITES_REPORT, deadline=300.0)
def diagnose(
    target: Annotated[str | None, Field(min_length=1, max_length=4096, description=(
        "Log file or run directory inside the allowed roots, or user@host:/path/to/train.log (read over ssh, "
        "host already in known_hosts)."))] = None,
    traceback_text: Annotated[str | None, Field(min_length=1, max_length=MAX_PASTE, description="Pasted traceback or log text, instead of a target.")] = None,
    pid: Annotated[int | None, Field(ge=1, le=4_194_304, description="A live (or just-ended) training process, instead of a target.")] = None,
    wandb: Annotated[str | None, Field(min_length=1, max_length=1000, description=(
        "A W&B run instead of a target: entity/project/run_id (WANDB_API_KEY from the server's environment) or a local "
        "wandb/run-* directory inside the allowed roots."))] = None,
    mlflow: Annotated[str | None, Field(min_length=1, max_length=64, description=(
        "An MLflow run id instead of a target (MLFLOW_TRACKING_URI from the server's environment)."))] = None,
    vertex_pipeline: Annotated[str | None, Field(min_length=1, max_length=300, description=(
        "A Vertex AI pipeline or custom job (id or full resource name) instead of a target; one pass, no polling."))] = None,
    project: Annotated[str | None, Field(max_length=64, description="GCP project, with vertex_pipeline (not needed with a full resource name).")] = None,
    region: Annotated[str | None, Field(max_length=64, description="GCP region, with vertex_pipeline (not needed with a full resource name).")] = None,
    artifacts: Annotated[str | None, Field(max_length=4096, description="Artifact directory to inventory alongside a log.")] = None,
    framework: Annotated[Framework | None, Field(description="Narrow checks to a framework (default: detected).")] = None,
    task: Annotated[Task | None, Field(description="Tune expectations for the task.")] = None,
    last: Annotated[int, Field(ge=1, le=100_000, description="Lines of the tail kept for context.")] = 500,
    out_dir: Annotated[str | None, Field(max_length=4096, description="Where check-failed-run.json goes (default: the server's --out-dir).")] = None,
) -> DiagnoseResult:
    """Run the whole diagnosis engine on one target and return the structured diagnosis: run status,
    primary cause with confidence, ruled-out classes, root cause, ranked fixes with risk levels and
    GO / NO-GO. The target is a local log or run directory, a remote log (user@host:/path), pasted
    traceback text, a process id, a W&B or MLflow run, or a Vertex AI job: give exactly one. Reads
    only; writes check-failed-run.json into the out dir and returns its path."""
    given = [k for k, v in (("target", target), ("traceback_text", traceback_text), ("pid", pid), ("wandb", wandb),
                            ("mlflow", mlflow), ("vertex_pipeline", vertex_pipeline)) if v is not None]
    if len(given) != 1:
        raise InputError("give exactly one of target (a log, run directory or user@host:/path), traceback_text, pid, wandb, "
                         "mlflow or vertex_pipeline" + (f" (got {', '.join(given)})" if given else ""))
    if (project or region) and vertex_pipeline is None:
        raise InputError("project and region go with vertex_pipeline only")
    r = roots()
    t = target if target is None or _REMOTE.match(target) else str(confine(target, r, want="any"))
    w = tracker_target(wandb) if wandb is not None else None
    a = str(confine(artifacts, r, want="dir")) if artifacts else None
    out = confine_new(out_dir, r) if out_dir else config().out_dir
    d = run_engine(DiagnoseRequest(target=t, traceback_text=traceback_text, pid=pid, wandb=w, mlflow=mlflow,
                                   vertex_pipeline=vertex_pipeline, project=project, region=region, once=True,
                                   artifacts=a, framework=framework, task=task, last=last))
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
