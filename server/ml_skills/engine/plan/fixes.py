"""Turn a classification into a ranked recovery plan with risk levels and exact next commands.

Candidate fixes come from the decisive signature, the other signals of the primary class,
anomaly-specific rules (early vs late NaN, memorisation, OOM at evaluation), and the class's
default fixes. They are ranked by impact x confidence / risk, as in design.md. The risk of each fix
comes from the `risk_of` function the caller passes (the face's loaded policy), never from a table here.

The candidates are named in candidates.py, kept where applies.py finds their conditions hold, and given their
exact command by launch.py; this module ranks them, and puts first the stop of a NaN run that is still saving.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ml_skills.catalog.loader import fixes as fix_catalog
from ml_skills.engine.classify.cascades import generic_signatures
from ml_skills.engine.classify.collect import LIVE_STATES
from ml_skills.engine.classify.signals import Signal
from ml_skills.engine.plan.applies import ruled_out_by_evidence, ruled_out_by_facts
from ml_skills.engine.plan.candidates import STOP_BEFORE_SAVE, candidates, file_line, named_by
from ml_skills.engine.plan.launch import command_for
from ml_skills.lazyre import lazy
from ml_skills.models import (
    AnomalyKind,
    ArtifactInventory,
    Classification,
    FailureClass,
    Fix,
    Level,
    LogEvidence,
    Risk,
    RiskOf,
    Role,
    RunFact,
    SourceEvidence,
)

IMPACT = {Level.HIGH: 3.0, Level.MEDIUM: 2.0, Level.LOW: 1.0}
RISK_COST = {Risk.SAFE: 1.0, Risk.NEEDS_APPROVAL: 1.6, Risk.DANGEROUS: 4.0}
MAX_FIXES = 5
# inspections named only when the failing line itself shows the cause is outside the run: another process held the GPU
# that ran out of memory (plan/shared_gpu.py), so shrinking the run would treat a healthy configuration
FIRST_WHEN_NAMED = ("free-shared-gpu",)
HALTED = ("stalled", "hung", "stopped")  # a process the collector found alive but not making progress


def _strongest(cls: Classification, signals: list[Signal]) -> Signal | None:
    return max((s for s in signals if s.failure_class == cls.primary), key=lambda s: s.weight, default=None)


def _prerequisites(cls: Classification, signals: list[Signal]) -> set[str]:
    """Fixes the strongest signal of the primary class lists before 'resume': they must come first.

    A full disk or a read-only mount lists freeing space before resuming; resuming first would
    fail at the next save. A crash or a truncated checkpoint lists resuming first: no prerequisite.
    """
    top = _strongest(cls, signals)
    named = named_by(top) if top is not None else []
    if "resume-valid-checkpoint" in named:
        return set(named[: named.index("resume-valid-checkpoint")])
    # a storage failure whose own fixes do not include resuming (a read-only output): fix it first
    return set(named) if cls.primary is FailureClass.IO_CHECKPOINT else set()


def _lead(cls: Classification, signals: list[Signal]) -> str | None:
    """The remedy the decisive line itself names: the first fix its signature or rule lists, when that is a change
    (not an inspection). A line that names its cause (a 403 naming the permission, 'no kernel image', a port in use)
    needs its remedy before any inspection, which a safe risk would otherwise rank first."""
    top = _strongest(cls, signals)
    if top is None or top.role is not Role.CAUSE:
        return None
    generic = generic_signatures()
    if top.label.split(":", 1)[-1] in generic:  # a specific wording on the same line says more ('EADDRINUSE' beside 'DistNetworkError')
        top = next((s for s in signals if s.failure_class == cls.primary and s.role is Role.CAUSE
                    and s.label.split(":", 1)[-1] not in generic and (s.source, s.line_no) == (top.source, top.line_no)), top)
    named = named_by(top)
    return named[0] if named and fix_catalog()[named[0]].kind != "inspect" else None


def plan(cls: Classification, signals: list[Signal], logs: list[LogEvidence], inv: ArtifactInventory | None, launch_command: str | None,
         *, risk_of: RiskOf, completed_clean: bool = False, facts: list[RunFact] | None = None,
         sources: list[SourceEvidence] | None = None) -> tuple[list[Fix], list[str]]:
    """Ranked fixes whose conditions hold, each citing what made it apply, and the commands to run next.

    `risk_of` gives each fix's risk level and the rule behind it: the policy the face enforces (models.RiskOf).

    `sources` name a process or tracker run that may still be there: its stack is dumped by its own pid, and a
    NaN run that is still running and saving is stopped first.
    """
    facts = facts or []
    out, commands = _ranked(cls, signals, logs, inv, launch_command, risk_of=risk_of, completed_clean=completed_clean, facts=facts)
    live = next((s for s in sources or [] if (s.state or "").lower() in LIVE_STATES), None)
    there = next((s for s in sources or [] if s.kind == "process" and s.name.isdigit() and s.state in (*LIVE_STATES, *HALTED)), None)
    if there is not None:  # the process itself, not a guess by name
        spy = f"py-spy dump --pid {there.name}   # where each thread of the process is now (pip install py-spy; may need sudo)"
        for i, f in enumerate(out):
            if f.fix_id == "dump-stacks":
                commands = [spy if c == f.command else c for c in commands]
                out[i] = f.model_copy(update={"command": spy})
    urgent = _stop_before_next_save(logs, facts, live)
    if urgent is None:
        return out, commands
    # before anything else: the next save may replace the last good checkpoint with NaN weights
    tpl = fix_catalog()[STOP_BEFORE_SAVE]
    risk, rule = risk_of(tpl.kind)
    first = Fix(rank=1, fix_id=tpl.id, action=tpl.action, kind=tpl.kind, risk=risk, risk_rule=rule, expected_impact=tpl.impact,
                time_to_try=tpl.time_to_try, validation=tpl.validation, command=urgent[1], because=urgent[0])
    rest = [x.model_copy(update={"rank": i}) for i, x in enumerate(out[: MAX_FIXES - 1], start=2)]
    return [first, *rest], ([urgent[1]] if urgent[1] else []) + commands


def _where_it_ends(logs: list[LogEvidence]) -> str:
    """What made 'collect more evidence' apply: the log's last line, read with no failure named up to it."""
    for log in logs:
        last = next(((n, x) for n, x in reversed(list(enumerate(log.tail.lines, log.tail.start_line))) if x.strip()), None) if log.tail else None
        if last is not None:
            return f"no failure named up to the log's last line ({Path(log.source).name}:{last[0]}: {last[1].strip()[:120]})"
    return ""


def _ranked(cls: Classification, signals: list[Signal], logs: list[LogEvidence], inv: ArtifactInventory | None, launch_command: str | None,
            *, risk_of: RiskOf, completed_clean: bool, facts: list[RunFact]) -> tuple[list[Fix], list[str]]:
    if cls.primary is None:  # a clean finished run has nothing to fix, only outputs to check; otherwise evidence is missing
        f = fix_catalog()["verify-outputs" if completed_clean else "collect-more-evidence"]
        risk, rule = risk_of(f.kind)
        run_dir = inv.root if inv else next((str(Path(x.source).parent) for x in logs if Path(x.source).is_absolute()), None)
        cmd = f"ml-skills verify-artifacts {shlex.quote(run_dir)}" if completed_clean and run_dir else None
        return [Fix(rank=1, fix_id=f.id, action=f.action, kind=f.kind, risk=risk, risk_rule=rule, expected_impact=f.impact,
                    time_to_try=f.time_to_try, validation=f.validation, command=cmd,
                    because="" if completed_clean else _where_it_ends(logs))], [cmd] if cmd else []
    cand = {fid: cw for fid, cw in candidates(cls, signals, logs, inv).items()
            if ruled_out_by_facts(fid, facts) is None and ruled_out_by_evidence(fid, cls, logs) is None}
    before = _prerequisites(cls, signals)
    scored = []
    for fid, (conf, because) in cand.items():
        f = fix_catalog()[fid]
        risk, rule = risk_of(f.kind)
        score = IMPACT[f.impact] * conf * max(cls.confidence, 0.3) / RISK_COST[risk]
        scored.append((score, fid, f, risk, rule, because))
    scored.sort(key=lambda t: (-t[0], t[1]))
    lead = _lead(cls, signals)
    if lead is not None and lead in cand:  # inspections that outscored the named remedy go after it
        at = next(i for i, t in enumerate(scored) if t[1] == lead)
        ahead = [t for t in scored[:at] if fix_catalog()[t[1]].kind == "inspect"]
        scored = [t for t in scored[:at] if t not in ahead] + [scored[at], *ahead] + scored[at + 1 :]
    first = [t for t in scored if t[1] in FIRST_WHEN_NAMED]  # the failing line says the run's own settings may be fine
    scored = first + [t for t in scored if t not in first]
    if before:  # resuming before the storage or config is fixed would fail the same way again
        pre = [t for t in scored if t[1] in before]
        scored = pre + [t for t in scored if t[1] not in before]
    out: list[Fix] = []
    commands: list[str] = []
    for rank, (_, fid, f, risk, rule, because) in enumerate(scored[:MAX_FIXES], start=1):
        cmd = command_for(fid, inv, launch_command, logs, facts)
        out.append(Fix(rank=rank, fix_id=fid, action=f.action, kind=f.kind, risk=risk, risk_rule=rule,
                       expected_impact=f.impact, time_to_try=f.time_to_try, validation=f.validation, command=cmd, because=because))
        if cmd:
            commands.append(cmd)
    return out, commands


_STEP = lazy(r"\(step (\d+)\)")


def _stop_before_next_save(logs: list[LogEvidence], facts: list[RunFact], live: SourceEvidence | None) -> tuple[str, str | None] | None:
    """(why, command) when a run that still runs went NaN and goes on saving checkpoints periodically.

    Its next save writes NaN weights: over the last good checkpoint when the trainer keeps only the newest
    (save_total_limit, keep_last_k), and in any case into the place a resume would look first. Stopping it
    is the most urgent action; the last good checkpoint is the newest one saved before the loss blew up.
    """
    if live is None:
        return None
    bad = [a for log in logs for a in log.trajectory.anomalies
           if a.kind in (AnomalyKind.NAN_ONSET, AnomalyKind.LOSS_BLOWUP) and a.line_no is not None]
    nan = next((a for a in bad if a.kind is AnomalyKind.NAN_ONSET), None)
    if nan is None:
        return None
    onset = min((a for a in bad if a.source == nan.source), key=lambda a: a.line_no or 0)
    saves = [f for f in facts if f.name == "checkpoint_saved" and f.source == nan.source and f.line_no]
    finite = [f for f in saves if (f.line_no or 0) < (nan.line_no or 0)]
    after = [f for f in saves if (f.line_no or 0) > (nan.line_no or 0)]
    if not finite and len(saves) < 2:
        return None
    steps = [int(m.group(1)) for f in saves if (m := _STEP.search(f.value))]
    every = steps[-1] - steps[-2] if len(steps) >= 2 and steps[-1] > steps[-2] else None
    where = f"process {live.name}" if live.kind == "process" else f"{live.kind} run {live.name} ({live.state})"
    why = f"the loss went non-finite at {file_line(nan.source, nan.line_no)} and the {where} is still running"
    if finite:
        last = finite[-1]
        why += f"; the last good checkpoint is {last.value.split(' (step')[0]} ({file_line(last.source or '', last.line_no)})"
        if onset is not nan and (last.line_no or 0) > (onset.line_no or 0):  # saved while the loss was already blowing up
            why += f", saved after the loss began to blow up at {file_line(onset.source, onset.line_no)}: check it, an older one may be needed"
    if after:
        why += f"; {len(after)} save(s) since the NaN already"
    if every:
        why += f"; it saves every {every} steps, next at step {steps[-1] + every}"
    cmd = None
    if live.kind == "process" and live.name.isdigit():
        cmd = (f"kill -STOP {live.name}   # pauses it before its next save; kill -CONT {live.name} undoes it, "
               f"kill -TERM {live.name} ends it once the good checkpoint is copied aside")
    return why, cmd


