"""get_tensorboard_run: the scalar series of a run's TensorBoard event files, thin over collectors/tensorboard."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ml_skills import targets
from ml_skills.mcp_tools.common import READ_ONLY, roots, tool
from ml_skills.mcp_tools.trackers import TrackerResult, with_logs
from ml_skills.safety.paths import confine


@tool(title="Read TensorBoard event files", annotations=READ_ONLY, deadline=120.0)
def get_tensorboard_run(
    path: Annotated[str, Field(min_length=1, max_length=4096, description=targets.TENSORBOARD.description)],
) -> TrackerResult:
    """Read a run's TensorBoard event files: every scalar step by step (loss, validation loss, lr,
    grad norm, throughput), how many files and which tags, and what could not be read (a file cut
    mid-record keeps the steps before the cut). Call it when the run logged to TensorBoard;
    `diagnose` with `tensorboard` runs the full engine on it."""
    from ml_skills.collectors import tensorboard  # imported at the first call (tensorboard's protobufs too)
    from ml_skills.engine.pipeline import DiagnoseRequest

    where = str(confine(path, roots(), want="any"))
    req = DiagnoseRequest(tensorboard=where)
    return with_logs(lambda: tensorboard.collect(req), req)


TOOLS = [get_tensorboard_run]
