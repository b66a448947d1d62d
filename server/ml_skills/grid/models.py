"""The values of a grid triage: one small record per attempt and per run, groups, the report.

A worker sends back an `AttemptRecord` (a few hundred bytes), never a `Diagnosis`, so memory
grows with the number of runs by a record each, and with the number of workers by a diagnosis each.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

# an attempt's outcome and the repeat rule's verdict are check-failed-run's too: defined in ml_skills.models, re-exported
from ml_skills.models import (
    AttemptBrief,
    Decision,
    FailureClass,
    Model,
    Outcome,
    Repeat,
    RepeatVerdict,
    Risk,
    RunStatus,
    ToolInfo,
)

__all__ = ["AttemptBrief", "AttemptRecord", "AttemptTask", "ExpectReport", "FixRef", "Group", "Outcome", "Repeat", "RepeatVerdict",
           "RunRecord", "TriageReport"]


class FixRef(Model):
    fix_id: str
    action: str
    risk: Risk


class AttemptTask(Model):
    """One attempt to diagnose: a run directory or a log file."""

    run: str = Field(description="The run (grid cell) this attempt belongs to.")
    attempt: int = Field(description="0 for the first launch, then the number in attempt-N / retryN.")
    path: str
    error: str | None = Field(None, description="Why discovery could not use this path (a symlink loop, no access).")
    source: str = Field("path", description="path (a log or run directory), mlflow (path is then the run id) or wandb (entity/project/run_id).")
    seen: datetime | None = Field(None, description="When the source says the run ended, for runs without a log file.")
    roots: list[str] | None = Field(None, description=(
        "The allowed roots the attempt is read under (the MCP call's): a worker process does not inherit them, so they travel with the task."))
    policy: str | None = Field(None, description=(
        "The action policy that rates each fix's risk (the CLI's --policy, the server's), as policy.rules.to_wire wrote it; "
        "None: the shipped default."))


class AttemptRecord(Model):
    """What the engine said about one attempt, cut to what a grid needs."""

    run: str
    attempt: int
    path: str
    outcome: Outcome
    run_status: RunStatus | None = None
    failure_class: FailureClass | None = None
    rule: str | None = Field(None, description="The signature, exception rule or detector that decided the class.")
    fingerprint: str | None = Field(None, description="12 hex digits of the hash of the normalised signature.")
    signature: str | None = Field(None, description="class | rule | decisive line with numbers, paths, hosts and times normalised.")
    decisive_line: str | None = Field(None, description="The decisive line as the log has it (redacted, cut to 300 characters).")
    decision: Decision | None = None
    decision_reason: str = ""
    fixes: list[FixRef] = Field(default_factory=list, description="The top fixes of the plan.")
    last_step: float | None = None
    started: datetime | None = Field(None, description="The first timestamp of the log.")
    ended: datetime | None = Field(None, description="The last timestamp of the log.")
    duration_s: float | None = Field(None, description="ended - started, when both are known.")
    mtime: datetime | None = Field(None, description="When the newest log was last written.")
    error: str | None = None
    attempts_inside: list[AttemptBrief] = Field(default_factory=list, description="Attempts a launcher restarted inside this one log.")
    repeat: RepeatVerdict | None = Field(None, description="The repeat rule over attempts_inside; the decision above already follows it.")


class RunRecord(Model):
    """One run (grid cell): its newest attempt decides the row; earlier ones feed the repeat rule."""

    name: str
    path: str
    outcome: Outcome
    failure_class: FailureClass | None = None
    fingerprint: str | None = None
    decision: Decision | None = None
    decision_reason: str = ""
    last_step: float | None = None
    duration_s: float | None = Field(None, description="Compute spent by all failed attempts, where known.")
    mtime: datetime | None = None
    attempts: list[AttemptBrief] = Field(default_factory=list)
    repeat: RepeatVerdict | None = None
    error: str | None = None


class Group(Model):
    """A row of the summary: runs that failed the same way, or the completed / running / undecided / unreadable ones."""

    outcome: Outcome
    fingerprint: str | None = None
    failure_class: FailureClass | None = None
    rule: str | None = None
    signature: str | None = None
    count: int
    runs: list[str] = Field(default_factory=list)
    first_seen: datetime | None = Field(None, description="Oldest log mtime among the runs.")
    last_seen: datetime | None = Field(None, description="Newest log mtime among the runs.")
    example_run: str | None = None
    example_line: str | None = None
    fixes: list[FixRef] = Field(default_factory=list, description="Fixes the plan of every run in the group shares (else the most common).")
    compute_lost_s: float | None = Field(None, description="Seconds between the first and last timestamp of each failed attempt, summed.")
    duration_known: int = Field(0, description="How many runs the compute lost counts (the others had no timestamps).")
    decisions: dict[str, int] = Field(default_factory=dict, description="GO / NO-GO counts after the repeat rule.")
    relaunch_blocked: int = Field(0, description="Runs whose last attempt failed the same way as the one before, with no progress past it.")


class ExpectReport(Model):
    """--expect: the grid that should exist against what is there."""

    expected: int
    cells_without_run: list[str] = Field(default_factory=list)
    runs_without_result: list[str] = Field(default_factory=list, description="Runs of the grid with no result file (failed ones included).")
    completed_without_result: list[str] = Field(default_factory=list, description="Runs that completed yet left no result where the grid looks: written elsewhere?")
    results_of_failed_runs: list[str] = Field(default_factory=list, description="Result files whose run's last attempt failed.")
    results_without_run: list[str] = Field(default_factory=list, description="Result files of no run that was triaged (an archive?).")
    notes: list[str] = Field(default_factory=list)


class TriageReport(Model):
    """triage-runs.json: every run of a grid diagnosed by the same engine, grouped by failure fingerprint."""

    schema_version: str = "1"
    tool: ToolInfo
    created_at: datetime
    targets: list[str]
    since: datetime | None = None
    backend: str = Field(description="local (a process pool of `workers`), inline (one worker, this process) or ray (a cluster of `workers` CPUs).")
    workers: int
    elapsed_s: float
    runs_total: int
    attempts_total: int
    counts: dict[str, int] = Field(description="Runs per outcome.")
    groups: list[Group] = Field(description="Failure groups by size, then one row each for completed, running, undecided, unreadable.")
    runs: list[RunRecord] = Field(default_factory=list)
    expect: ExpectReport | None = None
    complete: bool = Field(True, description="False when a run cap or the deadline stopped the triage early.")
    notes: list[str] = Field(default_factory=list)
    plot: str | None = Field(None, description="Path of triage-runs.png, when --plot was given.")
