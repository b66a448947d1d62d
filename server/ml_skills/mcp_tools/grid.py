"""triage_runs: a whole grid of runs through the engine, answered as groups, never as every report.

Read-only: it writes no triage-runs.json (the CLI does). Every target, every run found under it
and the expected-grid file are confined to the allowed roots; a run outside them, or a symlink
loop, is a row of unreadable runs, not a refusal of the whole call. Bounded by a run count and a
deadline: what was not diagnosed in time is counted in `notes`, and `complete` is false.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Annotated

from pydantic import Field

from ml_skills.errors import PathNotAllowed
from ml_skills.grid.models import ExpectReport, FixRef, Group, Outcome
from ml_skills.mcp_tools.common import READ_ONLY, ToolResult, config, roots, tool
from ml_skills.models import EvidenceStatus, FailureClass, Model
from ml_skills.safety.paths import confine
from ml_skills.safety.quoting import clean, fence, name_or_quoted, new_marker, quote_inline

MAX_NAMES = 20
MAX_GROUPS = 30
MAX_LISTED = 100  # names of each expect list in an answer


class GroupRow(Model):
    outcome: Outcome
    fingerprint: str | None = None
    failure_class: FailureClass | None = None
    rule: str | None = None
    count: int
    runs: list[str] = Field(description=f"Up to {MAX_NAMES} run names; runs_more counts the rest.")
    runs_more: int = 0
    first_seen: str | None = None
    last_seen: str | None = None
    fixes: list[FixRef] = Field(default_factory=list, description="The fixes every run of the group shares.")
    compute_lost_s: float | None = None
    decisions: dict[str, int] = Field(default_factory=dict)
    relaunch_blocked: int = Field(0, description="Runs whose relaunch failed the same way with no progress: NO-GO.")


class RelaunchRow(Model):
    run: str
    verdict: str = Field(description="same-failure-no-progress (NO-GO), same-failure-progressed (GO), different-failure, recovered.")
    decision: str | None
    reason: str


class TriageResult(ToolResult):
    runs_total: int
    attempts_total: int
    counts: dict[str, int] = Field(description="Runs per outcome: failed, completed, running, undecided, unreadable.")
    groups: list[GroupRow] = Field(description="Failure groups by size, then completed, running, undecided, unreadable.")
    relaunches: list[RelaunchRow] = Field(default_factory=list, description="Runs with several attempts, read against each other.")
    expect: ExpectReport | None = None
    quoted: str = Field("", description="Each group's decisive line (and unreadable runs' errors), fenced as quoted log data.")
    complete: bool = Field(True, description="False when the run cap or the deadline stopped the triage early.")
    elapsed_s: float
    workers: int


def _check(r: list[Path]):  # type: ignore[no-untyped-def]
    def check(p: str) -> str:
        return str(confine(p, r, want="any"))

    return check


def _confine_glob(pattern: str, r: list[Path]) -> str:
    """A glob may only look inside the allowed roots: its fixed leading directory is confined."""
    parts = Path(pattern).parts
    fixed = [p for p in parts[: next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts))]]
    if not fixed or ".." in parts:
        raise PathNotAllowed(f"glob {pattern!r}: start it with a directory inside the allowed roots, with no '..'")
    base = confine(str(Path(*fixed)), r, want="dir")
    return str(base / Path(*parts[len(fixed):]))


def _row(g: Group, marker: str) -> GroupRow:
    return GroupRow(outcome=g.outcome, fingerprint=g.fingerprint, failure_class=g.failure_class, rule=g.rule, count=g.count,
                    runs=[name_or_quoted(clean(n, 200).text, marker) for n in g.runs[:MAX_NAMES]], runs_more=max(0, len(g.runs) - MAX_NAMES),
                    first_seen=g.first_seen.isoformat() if g.first_seen else None, last_seen=g.last_seen.isoformat() if g.last_seen else None,
                    fixes=g.fixes, compute_lost_s=g.compute_lost_s, decisions=g.decisions, relaunch_blocked=g.relaunch_blocked)


@tool(title="Triage a grid of runs", annotations=READ_ONLY, deadline=300.0)
def triage_runs(
    targets: Annotated[list[Annotated[str, Field(min_length=1, max_length=4096)]], Field(min_length=1, max_length=20, description=(
        "Directories of run directories (each holding a log, or attempt-N/ folders), run directories of attempts, or globs "
        "of log files, inside the allowed roots."))],
    since: Annotated[str | None, Field(max_length=40, description="Only runs written since: 6h, 2d, 30m, or an ISO date.")] = None,
    expect: Annotated[str | None, Field(max_length=4096, description=(
        "The cells that should exist: a CSV or YAML of cell names, or a glob of result files, inside the allowed roots."))] = None,
    results: Annotated[str | None, Field(max_length=4096, description="With a CSV/YAML expect: a glob of the result files, e.g. /runs/results/*.json.")] = None,
    max_runs: Annotated[int, Field(ge=1, le=20_000, description="Stop after this many runs (complete is then false).")] = 2000,
    deadline_s: Annotated[float, Field(ge=5, le=240, description="Stop diagnosing after this many seconds and answer with what is done.")] = 120.0,
    workers: Annotated[int | None, Field(ge=1, le=64, description="Worker processes (default: the cores of the server's machine).")] = None,
) -> TriageResult:
    """Diagnose every run of a grid (a sweep, a study, a folder of failed jobs) with the same engine as
    diagnose, in parallel, and answer with groups: runs that failed the same way share a fingerprint
    (class, rule, decisive line with numbers, paths and times normalised), each group with its count,
    run names, when it was seen, the fixes its runs share and the compute lost. Completed, running,
    undecided and unreadable runs are rows of their own. A run relaunched after a failure that recurred
    with no progress past the previous failure point is NO-GO ('relaunching will fail the same way').
    With expect, also names cells with no run, runs with no result file and results of failed runs.
    Then call diagnose on one run of a group for its full report. Reads only; writes nothing."""
    from ml_skills.grid.discover import parse_since
    from ml_skills.grid.triage import default_workers, triage  # the engine comes with it: imported at the first call

    r = roots()
    confined = [_confine_glob(t, r) if glob.has_magic(t) else str(confine(t, r, want="any")) for t in targets]
    report, _ = triage(confined, since=parse_since(since) if since else None, workers=min(workers or default_workers(), os.cpu_count() or 1),
                       max_runs=max_runs, deadline_s=deadline_s, check=_check(r), policy=config().policy)
    exp = None
    if expect:
        from ml_skills.grid.expect import check_expected

        grid = _confine_glob(expect, r) if glob.has_magic(expect) else str(confine(expect, r, want="file"))
        res = _confine_glob(results, r) if results else None
        exp = check_expected(grid, res, report.runs, check=_check(r))
    notes = list(report.notes)
    cut = _cap_lists(exp, notes) if exp is not None else False
    marker = new_marker()
    if exp is not None and exp.cells_without_run:  # names read from the grid file's text: quoted data, like a log line
        exp.cells_without_run = [quote_inline(clean(n, 200).text, marker) for n in exp.cells_without_run]
    if exp is not None:  # run and file names are whoever named them: marked unless one word of a path (lead's gap, round 72)
        for name in _NAMED_LISTS:
            setattr(exp, name, [name_or_quoted(clean(n, 300).text, marker) for n in getattr(exp, name)])
    lines = [f"{g.fingerprint or g.outcome.value} ({g.example_run}): {g.example_line}" for g in report.groups[:MAX_GROUPS]
             if g.example_line and g.outcome in (Outcome.FAILED, Outcome.UNREADABLE, Outcome.UNDECIDED)]
    quoted = fence(lines, marker=marker, max_chars=20_000, label="decisive line of each group") if lines else None
    relaunches = [RelaunchRow(run=name_or_quoted(clean(x.name, 200).text, marker), verdict=x.repeat.kind.value, decision=x.decision.value if x.decision else None,
                              reason=x.repeat.reason) for x in report.runs if x.repeat is not None][:100]
    if len(report.groups) > MAX_GROUPS:
        notes.append(f"{len(report.groups) - MAX_GROUPS} smaller groups left out; narrow the targets to see them")
    status = EvidenceStatus.OK if report.complete else EvidenceStatus.PARTIAL
    return TriageResult(status=status, truncated=not report.complete or len(report.groups) > MAX_GROUPS or cut,
                        stripped_chars=quoted.stripped if quoted else 0,
                        marker=marker, notes=notes,
                        runs_total=report.runs_total, attempts_total=report.attempts_total, counts=report.counts,
                        groups=[_row(g, marker) for g in report.groups[:MAX_GROUPS]], relaunches=relaunches, expect=exp,
                        quoted=quoted.text if quoted else "", complete=report.complete, elapsed_s=report.elapsed_s, workers=report.workers)


_NAMED_LISTS = ("runs_without_result", "completed_without_result", "results_of_failed_runs", "results_without_run")


def _cap_lists(exp: ExpectReport, notes: list[str]) -> bool:
    """Each list of the expect check cut to its first MAX_LISTED names, the rest counted in a note: a grid of
    200,000 cells with one run made a 16.8 MB answer, every missing cell named, flagged not truncated."""
    cut = False
    for name in ("cells_without_run", "runs_without_result", "completed_without_result", "results_of_failed_runs", "results_without_run"):
        items = getattr(exp, name)
        if len(items) > MAX_LISTED:
            setattr(exp, name, items[:MAX_LISTED])
            notes.append(f"expect.{name}: {len(items)} in all, the first {MAX_LISTED} listed (the CLI's triage-runs --expect lists them all)")
            cut = True
    return cut


TOOLS = [triage_runs]
