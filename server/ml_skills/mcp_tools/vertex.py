"""describe_vertex_job: a Vertex AI pipeline or custom job and its error logs, thin over collectors/vertex.

google-cloud-aiplatform and google-cloud-logging are imported inside the collector, on first call.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ml_skills.mcp_tools.common import READ_ONLY_REMOTE, tool
from ml_skills.mcp_tools.sources import SourceResult, source_result


@tool(title="Describe a Vertex AI job", annotations=READ_ONLY_REMOTE, deadline=120.0)
def describe_vertex_job(
    job: Annotated[str, Field(min_length=1, max_length=300, description="Pipeline job id, custom job id, or the full resource name.")],
    project: Annotated[str | None, Field(max_length=64, description="GCP project (not needed with a full resource name).")] = None,
    region: Annotated[str | None, Field(max_length=64, description="GCP region such as us-central1 (not needed with a full name).")] = None,
) -> SourceResult:
    """Describe a Vertex AI pipeline or custom job: its state, the failed task, the error code and
    message, and the ERROR entries Cloud Logging holds for it. Call it when the run is a Vertex job."""
    from ml_skills.collectors import vertex  # imported at the first call: tools/list stays fast

    return source_result(vertex.describe(job, project, region))


TOOLS = [describe_vertex_job]
