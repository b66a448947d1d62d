"""get_wandb_run and get_mlflow_run: a tracker run's state, config, history and logs, thin over
collectors/wandb and collectors/mlflow (which import their SDK on first call, never at listing)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ml_skills.mcp_tools.common import READ_ONLY_REMOTE, tool, tracker_target
from ml_skills.mcp_tools.sources import SourceResult, source_result
from ml_skills.models import LogEvidence, SourceEvidence, Trajectory

LOG_LINES = 200  # of each run log's tail, handed over fenced as quoted data


class TrackerResult(SourceResult):
    trajectory: Trajectory = Field(
        description=(
            "The history as the detectors read it: each metric downsampled (NaN/Inf as null, extremes kept) "
            "and the anomalies found (NaN onset, loss blow-up, grad-norm spike, ...). The raw points are not sent."
        )
    )


def with_logs(src: SourceEvidence, logs: list[LogEvidence]) -> TrackerResult:
    for log in logs:
        if log.tail is not None:
            src.lines.extend(f"{log.source}: {line}" for line in log.tail.lines[-LOG_LINES:])
    from ml_skills.engine import scan

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

    target = tracker_target(run)
    return with_logs(*wandb.collect(DiagnoseRequest(wandb=target)))


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

    return with_logs(*mlflow.collect(DiagnoseRequest(mlflow=run_id)))


TOOLS = [get_wandb_run, get_mlflow_run]
