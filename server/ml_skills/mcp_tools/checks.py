"""Gate tools: verify-artifacts and the read-only screens of preflight-run. Thin over checks/.

The preflight tool never runs the user's script: the smoke and throughput runs execute code,
so they stay with the CLI (`ml-skills preflight-run --smoke-args ...`), run by the person.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ml_skills.checks.report import CheckReport
from ml_skills.mcp_tools.common import ToolResult, roots, tool
from ml_skills.models import EvidenceStatus
from ml_skills.safety.paths import confine
from ml_skills.safety.quoting import new_marker, quote_inline


class GateResult(ToolResult):
    report: CheckReport


def _marked(report: CheckReport) -> GateResult:
    """The gate's answer with each check's detail and each fact marked as quoted data: they quote the run's files (a
    metrics.json's keys, a manifest's file names, a script's lines). Before the fourteenth round a metrics.json key reading
    as an instruction came back bare in a check's detail. Check names, verdicts and the decision are the gate's own words."""
    marker = new_marker()
    checks = [c.model_copy(update={"detail": quote_inline(c.detail, marker)}) if c.detail else c for c in report.checks]
    facts = {k: quote_inline(v, marker) if v else v for k, v in report.facts.items()}
    return GateResult(status=EvidenceStatus.OK, marker=marker, report=report.model_copy(update={"checks": checks, "facts": facts}))


@tool(title="Verify a model's artifacts before promotion", deadline=120.0)
def verify_artifacts(
    path: Annotated[str, Field(min_length=1, max_length=4096, description="The run's artifact directory, inside the allowed roots.")],
    previous: Annotated[str | None, Field(max_length=4096, description="The version this one replaces (default: the manifest's previous_version).")] = None,
    first_version: Annotated[bool, Field(description="True only for a model's first version: skips the rollback check.")] = False,
) -> GateResult:
    """Check the artifact and provenance contract (valid weights, preprocessing, held-out metrics,
    frozen environment, manifest with matching hashes, run-scoped prefix, previous version still
    present). Fails closed: decision GO only when every required check passes."""
    from ml_skills.checks.provenance import verify  # imported at the first call: tools/list stays fast

    d = confine(path, roots(), want="dir")
    prev = str(confine(previous, roots(), want="any")) if previous else None
    return _marked(verify(d, prev, first_version=first_version))


@tool(title="Preflight screens for a training script (read-only)", deadline=120.0)
def preflight_checks(
    script: Annotated[str, Field(min_length=1, max_length=4096, description="The training script, inside the allowed roots.")],
    data: Annotated[str | None, Field(max_length=4096, description="Dataset directory the run will read.")] = None,
    expect_shards: Annotated[int | None, Field(ge=1, le=10_000_000, description="How many shards the dataset must hold.")] = None,
    marker: Annotated[str | None, Field(max_length=200, description="Completion marker the producer writes last, e.g. _SUCCESS.")] = None,
    shard_pattern: Annotated[str, Field(max_length=200, description="Glob of shard files.")] = "*",
    memory_limit: Annotated[str | None, Field(max_length=20, description="The job's memory limit, e.g. 16G.")] = None,
    launch: Annotated[str | None, Field(max_length=4000, description="The launch command, checked for detaching and a timeout.")] = None,
    platform_cap_hours: Annotated[float | None, Field(gt=0, le=10_000, description="The platform's maximum job duration.")] = None,
) -> GateResult:
    """The screens of preflight-run that only read: compile and imports, checkpoint-and-resume
    and save-on-failure in the code, input completeness (no producer still writing), the memory
    budget of eager image decoding, a detached launch under the platform cap. The smoke run and
    throughput probe execute the script: ask the person to run `ml-skills preflight-run` for those."""
    from ml_skills.checks import preflight as pf  # imported at the first call: tools/list stays fast

    s = confine(script, roots(), want="file")
    d = str(confine(data, roots(), want="dir")) if data else None
    # no smoke or probe run (they execute the script), so no args, timeout or out_dir; uint8 images, a 60 s quiet window
    report = pf.preflight(pf.PreflightOptions(script=str(s), cap_hours=platform_cap_hours, data=d, expect_shards=expect_shards,
                                              marker=marker, shard_pattern=shard_pattern, quiet_seconds=60.0,
                                              memory_limit=memory_limit, decode_bytes=1, launch=launch))
    return _marked(report)


TOOLS = [verify_artifacts, preflight_checks]
