"""The text summary of triage-runs: one block per group, biggest first, then the other rows."""

from __future__ import annotations

from ml_skills.grid.models import Group, Outcome, Repeat, TriageReport
from ml_skills.safety.quoting import one_line

MAX_RUN_NAMES = 8


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _names(names: list[str]) -> str:
    more = len(names) - MAX_RUN_NAMES
    return ", ".join(names[:MAX_RUN_NAMES]) + (f" and {more} more" if more > 0 else "")


def group_block(g: Group, total: int) -> list[str]:
    share = f"{100 * g.count / total:.0f}%" if total else "-"
    runs = f"{g.count} run{'s' if g.count != 1 else ''} ({share})"
    if g.outcome is not Outcome.FAILED:
        head = f"{runs}  {g.outcome.value}"
        out = [head, f"    runs: {_names(g.runs)}"]
        if g.outcome in (Outcome.UNDECIDED, Outcome.UNREADABLE) and g.example_line:
            out.append(f"    e.g. {g.example_run}: {g.example_line[:200]}")
        return out
    out = [f"{runs}  {g.failure_class.value if g.failure_class else '?'}  [{g.rule or '-'}]  fingerprint {g.fingerprint}"]
    if g.example_line:
        out.append(f"    decisive line ({g.example_run}): {g.example_line[:200]}")
    out.append(f"    runs: {_names(g.runs)}")
    if g.first_seen and g.last_seen:
        out.append(f"    seen: {g.first_seen:%Y-%m-%d %H:%M} .. {g.last_seen:%Y-%m-%d %H:%M}")
    if g.compute_lost_s is not None:
        out.append(f"    compute lost: {_duration(g.compute_lost_s)} over {g.duration_known} run(s) with timestamps")
    for i, f in enumerate(g.fixes, 1):
        out.append(f"    fix {i} [{f.risk.value}]: {f.action}")
    dec = ", ".join(f"{k} {v}" for k, v in sorted(g.decisions.items()))
    if dec:
        out.append(f"    decisions: {dec}" + (f"; {g.relaunch_blocked} relaunch(es) would fail the same way" if g.relaunch_blocked else ""))
    return out


def render(r: TriageReport, path: str | None = None) -> str:
    c = r.counts
    lines = [f"triage-runs: {r.runs_total} runs ({r.attempts_total} attempts) in {r.elapsed_s:.1f} s, {r.backend} x{r.workers}",
             "  " + ", ".join(f"{k} {v}" for k, v in c.items() if v) + f"; {sum(g.outcome is Outcome.FAILED for g in r.groups)} failure group(s)",
             ""]
    for g in r.groups:
        lines += group_block(g, r.runs_total) + [""]
    repeats = [run for run in r.runs if run.repeat is not None]
    if repeats:
        lines.append("Relaunched runs:")
        for run in repeats:
            assert run.repeat is not None
            mark = {Repeat.SAME_NO_PROGRESS: "NO-GO", Repeat.SAME_PROGRESSED: "GO", Repeat.RECOVERED: "ok", Repeat.DIFFERENT: "differs"}[run.repeat.kind]
            lines.append(f"  {run.name} ({len(run.attempts)} attempts) {mark}: {run.repeat.reason}")
        lines.append("")
    if r.expect is not None:
        e = r.expect
        lines.append(f"Expected grid: {e.expected} cells")
        for label, names in (("cells with no run", e.cells_without_run), ("runs with no result file", e.runs_without_result),
                             ("completed runs with no result file", e.completed_without_result),
                             ("result files whose run failed", e.results_of_failed_runs), ("result files of no triaged run", e.results_without_run)):
            lines.append(f"  {label}: {len(names)}" + (f" ({_names(names)})" if names else ""))
        lines += [f"  note: {n}" for n in e.notes]
        lines.append("")
    for n in r.notes:
        lines.append(f"Note: {n}")
    if not r.complete:
        lines.append("Incomplete: not every run was diagnosed (see the notes).")
    if path:
        lines.append(f"Report: {path}")
    return "\n".join(one_line(x) for x in lines).rstrip("\n") + "\n"  # each entry is one line, whatever a run's name holds
