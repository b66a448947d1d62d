"""check_process: a live training process's health, thin over collectors/process."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ml_skills.mcp_tools.common import tool
from ml_skills.mcp_tools.sources import SourceResult, source_result


@tool(title="Check a training process", deadline=60.0)
def check_process(
    pid: Annotated[int, Field(ge=1, le=4_194_304, description="Process id of the training run (or its launcher).")],
    sample_seconds: Annotated[float, Field(ge=0.5, le=30, description="How long to watch CPU, memory and log writes.")] = 3.0,
) -> SourceResult:
    """Say whether a training process is busy, sleeping, stalled, hung, stopped, a zombie or gone:
    CPU and memory over a short sample, children, GPU use, and which logs it writes and when it
    last wrote them. Read-only: it never signals the process (request_action does that)."""
    from ml_skills.collectors import process  # imported at the first call: tools/list stays fast

    ins = process.inspect(pid, sample_seconds=sample_seconds)
    return source_result(process.evidence(ins, process.STALL_AFTER))


TOOLS = [check_process]
