"""When the evidence cannot name a cause (or names one only from a symptom), the smallest artifact that would: the
process state, the job's stderr, the other ranks' logs, the kernel log, the rest of a traceback cut before its exception."""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.analyse.cuttraceback import ends_in_traceback
from ml_skills.engine.analyse.ranks import collective_desync, first_failing, rank_reached
from ml_skills.engine.analyse.stops import CUT_IN_CALL, DIST_INIT, SCHEDULER_CANCELLED
from ml_skills.engine.classify.signals import Signal
from ml_skills.engine.classify.status import fmt_number
from ml_skills.engine.read.tracebacks import interrupted
from ml_skills.models import Classification, EvidenceStatus, FailureClass, LogEvidence, Role, SourceEvidence


def insufficient_evidence(cls: Classification, logs: list[LogEvidence], sources: list[SourceEvidence], signals: list[Signal]) -> str | None:
    if not logs and not sources:
        return "no log was read: give the training log (stdout/stderr of the job) or the run directory"
    if all(l.status is not EvidenceStatus.OK for l in logs) and not sources:
        return "; ".join(p for l in logs for p in l.problems) or "the logs could not be read"
    live = next((s for s in sources if s.kind == "process" and s.state in ("running", "sleeping") and s.status is EvidenceStatus.OK), None)
    if cls.primary is None and live is not None:
        return (f"the process is alive ({live.state}) and its logs show no error: nothing has failed yet; check again if it "
                "stops logging or ends, or give the job's stderr")
    if cls.primary is None:
        missing = [m for s in sources for m in s.missing]
        if missing:  # say what could not be read before asking for more
            return "could not read " + "; ".join(missing)
        cut = _cut_in_traceback(logs)
        if cut:
            return cut
        lp = next((l.trajectory.last_progress for l in logs if l.trajectory.last_progress), None)
        stop = next((t for l in logs for t in l.tracebacks if interrupted(t.exc_type, t.message)), None)
        if stop is not None:
            at = f" at step {fmt_number(lp.step)}" if lp is not None and lp.step is not None else ""
            return (f"the run was interrupted ({stop.exc_type.rsplit('.', 1)[-1]} at line {stop.line_no}: a Ctrl-C, or a scheduler's SIGINT){at} "
                    "while it was not blocked waiting, so nothing in the log says it failed: need why it was stopped "
                    "(who sent the signal, the scheduler's record) or, if it had slowed down, its timestamps or throughput")
        cancel = next((h for l in logs for h in l.hits if h.signature_id == SCHEDULER_CANCELLED), None)
        if cancel is not None and lp is not None:
            at = f"step {fmt_number(lp.step)} (line {lp.line_no})" if lp.step is not None else f"line {lp.line_no}"
            return (f"a person cancelled the job at line {cancel.line_no} (scancel or bkill: no limit is named) after "
                    f"progress up to {at}, so nothing in the log says it failed: need why it was cancelled (sacct -j "
                    "JOB -o State,User,Elapsed; whoever ran scancel) or, if it had slowed down, its timestamps or throughput")
        if lp:
            when = f" around {lp.time:%H:%M}" if lp.time else ""
            at = f"step {fmt_number(lp.step)} (line {lp.line_no})" if lp.step is not None else f"line {lp.line_no}"
            tail = next((l.tail for l in logs if l.tail and l.tail.lines), None)
            after = [x for i, x in enumerate(tail.lines, tail.start_line) if i > lp.line_no and x.strip()] if tail else []
            stage = (" and end in distributed start-up (NCCL or process-group init), where a hang usually means a rank "
                     "that never joined, an unreachable MASTER_ADDR:PORT or a broken GPU peer-to-peer path"
                     if any(DIST_INIT.search(x) for x in after[-5:]) else "")
            where = (f"the last progress is at {at} and the {len(after)} lines after it hold no error{stage}" if after
                     else f"the log ends at {at} with no error")
            return (f"{where}: need the process state "
                    f"(ml-skills check-failed-run --pid PID), the job's stderr, or the kernel log{when} (dmesg -T)")
        last = next((l.tail.lines[-1].strip() for l in logs if l.tail and l.tail.lines and l.tail.lines[-1].strip()), "")
        if last and not any("completed-marker" in l.frameworks for l in logs):
            stage = (", during distributed start-up (process-group init), where a hang usually means a rank that never "
                     "joined or an unreachable MASTER_ADDR:PORT") if DIST_INIT.search(last) else ""
            return (f"the log stops with no error and no sign of completion (last line: {last[:160]}){stage}: if the process "
                    "is still alive it is hung there, so dump its stacks (py-spy dump --pid PID, or ml-skills check-failed-run "
                    "--pid PID); if it ended, need the job's stderr or the scheduler's record of how it ended")
        return ("no failure signature, traceback or metric anomaly in the log: need the job's stderr (errors often go "
                "there, not to the training log) or the scheduler's record of how the job ended")
    own = [s for s in signals if s.failure_class is cls.primary and s.role is not Role.HINT]
    if own and all(s.kind == "stop" and s.label.startswith(CUT_IN_CALL) for s in own) and (cut := _cut_in_traceback(logs)):
        return cut  # the class is read from where a cut traceback was raised: what was raised is still missing
    if own and max(own, key=lambda s: s.weight).inferred and (cut := _cut_in_traceback(logs)):
        # the class rests on the warning before the lost traceback (warninglines.warning_before_a_lost_error)
        return f"{cut}; the class is read from the last failure logged before that traceback, a warning no training followed"
    if cls.primary is FailureClass.NCCL_DISTRIBUTED and all(s.role.value != "cause" for s in signals if s.failure_class is cls.primary):
        if collective_desync(logs):  # the ranks' reports are here and disagree: ask for what each rank issued
            return ("every rank only timed out, in different collectives (a desync, see the root cause): need the "
                    "collective each rank issued - rerun with TORCH_NCCL_DESYNC_DEBUG=1 or dump the flight recorder "
                    "(TORCH_NCCL_TRACE_BUFFER_SIZE > 0) - or each rank's step at the time")
        found = first_failing(logs, signals)
        if found is not None and found[0].kind == "stopped":  # the log holds the ranks, and one went silent
            silent = found[0]
            return (f"only a collective timeout: {Path(silent.source).name} stopped {rank_reached(silent).strip() or 'early'} "
                    "with no error of its own while the others waited for it: need where it was blocked (its stack: "
                    "faulthandler.register(signal.SIGTERM) so the launcher's SIGTERM dumps it, or py-spy dump --pid on "
                    "a live rerun)")
        if len(logs) < 2:
            return ("only a collective timeout, with no error of its own: need the other ranks' logs (each rank's "
                    "stderr) to find the rank that crashed or hung first")
    if cls.primary is FailureClass.OOM and all(s.label == "sigkill-exit-137" for s in signals if s.failure_class is FailureClass.OOM):
        return "a SIGKILL (exit 137) with no memory error in the log: need the kernel log (dmesg -T | grep -i oom) or the container's OOMKilled reason to confirm OOM"
    return None


def _cut_in_traceback(logs: list[LogEvidence]) -> str | None:
    """A log whose last lines are traceback frames with no exception line was cut mid-traceback."""
    for l in logs:
        if ends_in_traceback(l):
            return (f"{Path(l.source).name} ends inside a traceback, before its exception line: need the rest of the log "
                    "(the last lines of the job's stderr name the exception)")
    return None
