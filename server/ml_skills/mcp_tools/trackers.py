"""get_wandb_run and get_mlflow_run: a tracker run's state, config, history and logs, thin over
collectors/wandb and collectors/mlflow (which import their SDK on first call, never at listing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from ml_skills.mcp_tools.common import READ_ONLY_REMOTE, counted, tool, tracker_target
from ml_skills.mcp_tools.sources import SourceResult, source_result
from ml_skills.models import RawEvidence, Trajectory

if TYPE_CHECKING:
    from ml_skills.engine.pipeline import DiagnoseRequest

LOG_LINES = 200  # of each run log's tail, handed over fenced as quoted data


class TrackerResult(SourceResult):
    trajectory: Trajectory = Field(
        description=(
            "The history as the detectors read it: each metric downsampled (NaN/Inf as null, extremes kept) "
            "and the anomalies found (NaN onset, loss blow-up, grad-norm spike, ...). The raw points are not sent."
        )
    )


def with_logs(collect: Callable[[], RawEvidence], req: DiagnoseRequest) -> TrackerResult:
    """The collector's raw evidence read by the engine (its logs scanned, its history analysed), summarised, with what was
    stripped and masked while it was read (seventy-second round: a W&B run whose config held tokens said `redactions: 0`,
    the collector's reading running where the call's last pass cannot count it)."""
    result, gone, red = counted(lambda: _summarised(collect(), req))
    return result.model_copy(update={"redactions": result.redactions + red, "stripped_chars": result.stripped_chars + gone})


def _summarised(raw: RawEvidence, req: DiagnoseRequest) -> TrackerResult:
    from ml_skills.engine.pipeline import read_raw
    from ml_skills.engine.read import scan

    src = raw.source
    for log in read_raw(raw, req):
        if log.tail is not None:
            src.lines.extend(f"{log.source}: {line}" for line in log.tail.lines[-LOG_LINES:])

    trajectory = scan.from_metrics(src.metrics, source=f"{src.kind}:{src.name}").trajectory
    src.metrics = []  # thousands of points (and NaN, which JSON cannot carry): the summary above stands for them
    return TrackerResult(**source_result(src).model_dump(), trajectory=trajectory)


@tool(title="Read a W&B run", annotations=READ_ONLY_REMOTE, deadline=120.0)
def get_wandb_run(
    run: Annotated[
        str,
        Field(
            min_length=1,
            max_length=1000,
            description=(
                "entity/project/run_id (W&B public API, WANDB_API_KEY from the server's environment), "
                "or a local wandb/run-* or wandb/offline-run-* directory inside the allowed roots."
            ),
        ),
    ],
) -> TrackerResult:
    """Read a W&B run: state, config, summary, the whole metric history lined up by step (loss,
    grad_norm, lr, throughput, validation), GPU and host memory peaks, its files and the tail of
    its console log. Call it when the run was tracked in W&B; `diagnose` runs the full engine on it."""
    from ml_skills.collectors import wandb  # imported at the first call (its HTTP client too): tools/list stays fast
    from ml_skills.engine.pipeline import DiagnoseRequest

    req = DiagnoseRequest(wandb=tracker_target(run))
    return with_logs(lambda: wandb.collect(req), req)


@tool(title="Read an MLflow run", annotations=READ_ONLY_REMOTE, deadline=120.0)
def get_mlflow_run(
    run_id: Annotated[
        str,
        Field(
            min_length=1,
            max_length=64,
            description="MLflow run id; the tracking store is MLFLOW_TRACKING_URI in the server's environment.",
        ),
    ],
) -> TrackerResult:
    """Read an MLflow run: status, params, every page of its metric history lined up by step,
    system memory peaks, its artifact listing and the tail of its log artifacts. Call it when
    the run was tracked in MLflow; `diagnose` runs the full engine on it."""
    from ml_skills.collectors import mlflow
    from ml_skills.engine.pipeline import DiagnoseRequest

    req = DiagnoseRequest(mlflow=run_id)
    return with_logs(lambda: mlflow.collect(req), req)


TOOLS = [get_wandb_run, get_mlflow_run]
