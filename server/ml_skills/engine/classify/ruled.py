"""Why each competing class loses to the primary: the line that contradicts it, or what it would take.

A reason cites the competitor's own strongest line and what beats it there, by line number, so a reader
can check both in the log: the training progress after it (the run went on), the primary failure that came
before it (it followed), the cause it only reports (a symptom), or the line the run really ended on. A
likely-confused class with no signal at all gets what it would have had to show. Log text is not quoted
here (the evidence and excerpt carry it, fenced as data); lines are named by signature and number.
"""

from __future__ import annotations

from ml_skills.engine.classify.signals import Signal
from ml_skills.models import FailureClass, Role

# What a class would have to show to be the cause: said of a likely-confused class that left no signal.
WOULD_SHOW: dict[FailureClass, str] = {
    FailureClass.NAN_INF: "a NaN/Inf loss or gradient",
    FailureClass.OOM: "an out-of-memory error, or a kill while memory grew (the kernel's oom-kill)",
    FailureClass.OPTIMIZATION_DIVERGENCE: "a finite loss that rises or blows up",
    FailureClass.CUDA_RUNTIME: "a CUDA or driver error (illegal memory access, device-side assert)",
    FailureClass.NCCL_DISTRIBUTED: "a collective error or timeout (NCCL/Gloo, watchdog, lost rank)",
    FailureClass.DATA_PIPELINE: "an error reading or batching data",
    FailureClass.CONFIG_ERROR: "a bad argument, flag or config key",
    FailureClass.IO_CHECKPOINT: "a failed file or checkpoint read/write (missing, disk full, truncated)",
    FailureClass.STALLED: "a log that goes silent while the process lives",
    FailureClass.PROCESS_CRASH: "a process dying on a signal (segfault, abort, kill)",
    FailureClass.EVALUATION_MISMATCH: "validation metrics at odds with training",
    FailureClass.PIPELINE_ORCHESTRATION: "an orchestrator's task or pod failure",
    FailureClass.CLOUD_PERMISSIONS_QUOTA: "a permission or quota refusal (403, quota exceeded)",
}


def _file(s: Signal) -> str:
    return s.source.rsplit("/", 1)[-1]


def at(s: Signal, ref: Signal | None = None) -> str:
    """'label at line N', with the file when it is not the reference signal's."""
    where = f" at line {s.line_no}" if s.line_no else ""
    other = f" of {_file(s)}" if ref is not None and s.source != ref.source and s.line_no else ""
    return f"{s.label.removeprefix('traceback:')}{where}{other}"


def survived(best: Signal, progress: tuple[int, int] | None, retry: int | None) -> str:
    """The run went on after it: a later attempt that ran clean, or training progress from one later line to another."""
    if retry is not None and best.line_no is not None and best.line_no < retry:
        return f"{at(best)} came before a later attempt (from line {retry}) that ran without error, so the run went on past it"
    lines = f" (lines {progress[0]}-{progress[1]})" if progress else ""
    return f"{at(best)} came before later training progress{lines}, so the run survived it"


def warned(best: Signal, decisive: Signal) -> str:
    return f"only in warnings or INFO-level lines ({at(best)}), not logged as an error; the failure is {at(decisive, best)}"


def follows(best: Signal, decisive: Signal) -> str:
    return f"secondary: {at(best)} follows {at(decisive, best)}, the first failure (cascade)"


def symptom(best: Signal, decisive: Signal) -> str:
    first = best.source == decisive.source and best.line_no and decisive.line_no and best.line_no < decisive.line_no
    return (f"secondary: {at(best)} is a symptom (cascade): it reports a failure and names no cause; "
            f"the cause is {at(decisive, best)}" + (", printed after it" if first else ""))


def weaker(best: Signal, sig: list[Signal], decisive: Signal, primary: FailureClass, psigs: list[Signal], generic: frozenset[str],
           score: float, top: float) -> str:
    """A competitor with a live signal that still loses: say what about its line makes it lose."""
    mine, theirs = at(best), at(decisive, best)
    if best.role is Role.HINT:
        return f"{mine} is only a hint (it tilts a diagnosis, it does not fail a run); the failure is {theirs}"
    if best.label.removeprefix("traceback:") in generic:
        return f"{mine} is an exit code or signal that names no cause; {theirs} names one"
    same_file = best.source == decisive.source and best.line_no is not None and decisive.line_no is not None
    if same_file and best.line_no == decisive.line_no:
        support = sum(1 for s in psigs if s is not decisive and s.line_no != decisive.line_no)
        more = f"{support} more line(s) support {primary.value}" if support else ""
        if decisive.weight > best.weight + 0.05:
            return f"{mine} is on the same line as {theirs}, the stronger reading of it ({decisive.weight:.1f} against {best.weight:.1f})" + (
                f"; {more}" if more else "")
        return f"{mine} is on the same line as {theirs}, an equal reading of it; " + (more or "a tie, broken by match order")
    if same_file and best.line_no < decisive.line_no:  # type: ignore[operator]
        if best.role is Role.SYMPTOM and decisive.role is Role.CAUSE:
            return f"{mine} reports a failure without naming it; {theirs} names the cause"
        return f"{mine} did not end the run: it went on to {theirs}"
    if same_file:
        return f"{mine} comes after {theirs}, which failed first"
    return f"weaker evidence: {mine} scores {score:.2f} against {top:.2f} for {theirs}"


def no_signal(cls: FailureClass) -> str:
    """A likely-confused class that left no signal: what its failure would have looked like."""
    return f"no evidence: no signal of its own; its failure would be {WOULD_SHOW[cls]}"
