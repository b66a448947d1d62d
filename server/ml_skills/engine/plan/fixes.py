"""Turn a classification into a ranked recovery plan with risk levels and exact next commands.

Candidate fixes come from the decisive signature, the other signals of the primary class,
anomaly-specific rules (early vs late NaN, memorisation, OOM at evaluation), and the class's
default fixes. They are ranked by impact x confidence / risk, as in design.md. The risk of each fix
comes from the `risk_of` function the caller passes (the face's loaded policy), never from a table here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ml_skills.catalog.loader import exception_rules, signatures
from ml_skills.catalog.loader import fixes as fix_catalog
from ml_skills.engine.classify.cascades import EXTERNAL_KILL
from ml_skills.engine.classify.collect import LIVE_STATES
from ml_skills.engine.classify.signals import Signal
from ml_skills.engine.plan.facts import fact, version_below
from ml_skills.lazyre import lazy
from ml_skills.models import (
    Anomaly,
    AnomalyKind,
    ArtifactInventory,
    Classification,
    FailureClass,
    Fix,
    Level,
    LineRef,
    LogEvidence,
    Risk,
    RiskOf,
    RunFact,
    Signature,
    SourceEvidence,
)

IMPACT = {Level.HIGH: 3.0, Level.MEDIUM: 2.0, Level.LOW: 1.0}
RISK_COST = {Risk.SAFE: 1.0, Risk.NEEDS_APPROVAL: 1.6, Risk.DANGEROUS: 4.0}
MAX_FIXES = 5
STOP_BEFORE_SAVE = "stop-before-next-save"
HALTED = ("stalled", "hung", "stopped")  # a process the collector found alive but not making progress
POSITION_STEP = 0.15  # a signature lists its fixes most likely first: each later one is that much less sure
# fixes that only make sense when specific evidence names them, never as a class default
# fixes for signals the engine derives (not catalog signatures): an external SIGKILL leaves the
# code and data intact, so resuming is the recovery; confirming it was not the OOM killer is cheap
DERIVED_FIXES = {EXTERNAL_KILL: ["resume-valid-checkpoint", "check-kernel-oom", "save-on-signal"]}
NEEDS_EVIDENCE = {"collect-more-evidence", "verify-outputs", "resume-valid-checkpoint", "fix-launch-command", "check-train-data-coverage",
                  "eval-batch-size", "expandable-segments", "dedupe-splits", "check-split-overlap", "raise-collective-timeout", "exclude-node",
                  "one-gpu-per-rank", STOP_BEFORE_SAVE}


def _where(source: str, line_no: int | None) -> str:
    return f"{source.rsplit('/', 1)[-1]}:{line_no}" if line_no else source.rsplit("/", 1)[-1]


class _Fixes:
    """The fixes named so far: fix id -> (how sure, the evidence that named it). A fix keeps its surest naming;
    `why` is the evidence behind the fixes being added now."""

    def __init__(self) -> None:
        self.cand: dict[str, tuple[float, str]] = {}
        self.why = ""

    def add(self, fix_id: str, conf: float) -> None:
        if fix_id in fix_catalog() and conf > self.cand.get(fix_id, (0.0, ""))[0]:
            self.cand[fix_id] = (conf, self.why)


def _named_by_primary_signals(fixes: _Fixes, psig: list[Signal], sig_by_id: dict[str, Signature]) -> None:
    """The fixes the primary class's four strongest signals list (signature, exception rule or derived signal),
    each later one in a list a little less sure."""
    rules = {r.id: r for r in exception_rules()}
    for rank, s in enumerate(psig[:4]):
        base = 1.0 if rank == 0 else 0.8
        fixes.why = f"{s.label} at {_where(s.source, s.line_no)}"
        named: list[str] = []
        if s.label in DERIVED_FIXES:
            named = DERIVED_FIXES[s.label]
        elif s.kind == "signature" and s.label in sig_by_id:
            named = sig_by_id[s.label].fixes
        elif s.kind == "traceback":
            rid = s.label.split(":", 1)[1]
            named = rules[rid].fixes if rid in rules else sig_by_id[rid].fixes if rid in sig_by_id else []
        for i, f in enumerate(named):
            fixes.add(f, base - POSITION_STEP * i)


def _named_by_nan_onset(fixes: _Fixes, nan: Anomaly) -> None:
    """Where the first NaN came says what to fix: validation only, early (the learning rate), after exploding
    gradients, or late (one bad batch)."""
    add = fixes.add
    if nan.failure_class is FailureClass.EVALUATION_MISMATCH:  # only the validation side is nan
        add("fix-eval-config", 1.0)
    elif "first 100 steps" in nan.detail:
        add("lower-lr-add-warmup", 1.0); add("bf16-or-loss-scaling", 0.95); add("grad-clipping", 0.7)
        cand = fixes.cand
        if "find-bad-batch" in cand:  # early NaN is rarely one batch
            cand["find-bad-batch"] = (min(cand["find-bad-batch"][0], 0.3), cand["find-bad-batch"][1])
    elif "exploding" in nan.detail:
        add("grad-clipping", 1.0); add("lower-lr-add-warmup", 0.9); add("resume-before-spike", 0.7)
    else:
        add("find-bad-batch", 1.0); add("guard-numerics", 0.8); add("grad-clipping", 0.7)


def _named_by_anomalies(fixes: _Fixes, primary: FailureClass | None, logs: list[LogEvidence]) -> None:
    """The fixes each trajectory anomaly calls for (the evaluation ones only when evaluation is the failure)."""
    anomalies = [a for log in logs for a in log.trajectory.anomalies]
    first = {a.kind: a for a in reversed(anomalies)}
    add = fixes.add

    def seen(kind: AnomalyKind) -> bool:
        """Whether the anomaly was found; the fixes added next cite it."""
        if kind in first:
            fixes.why = f"{kind.value} at {_where(first[kind].source, first[kind].line_no)}"
        return kind in first

    if seen(AnomalyKind.NAN_ONSET):
        _named_by_nan_onset(fixes, next(a for a in anomalies if a.kind is AnomalyKind.NAN_ONSET))
    if seen(AnomalyKind.TRAIN_VAL_DIVERGENCE) and primary is FailureClass.EVALUATION_MISMATCH:
        add("check-train-data-coverage", 1.0); add("input-completeness-check", 1.0)
    if seen(AnomalyKind.VALIDATION_METRIC_NEAR_ZERO) and primary is FailureClass.EVALUATION_MISMATCH:
        add("fix-eval-config", 1.0); add("check-label-range", 0.8)
    if seen(AnomalyKind.VALIDATION_METRIC_FROZEN) and primary is FailureClass.EVALUATION_MISMATCH:
        add("fix-eval-config", 1.0)
    if seen(AnomalyKind.EARLY_PERFECT_VALIDATION) and primary is FailureClass.EVALUATION_MISMATCH:
        add("check-split-overlap", 1.0); add("dedupe-splits", 1.0)
    if seen(AnomalyKind.LOSS_BLOWUP) or seen(AnomalyKind.LOSS_FROZEN):
        add("lower-lr-add-warmup", 0.95); add("grad-clipping", 0.9); add("resume-before-spike", 0.8)
    if seen(AnomalyKind.NO_PROGRESS):
        add("dump-stacks", 1.0); add("add-timeouts", 0.7); add("loader-num-workers-zero", 0.6)
    if seen(AnomalyKind.THROUGHPUT_COLLAPSE):
        add("dump-stacks", 0.8); add("loader-num-workers-zero", 0.5)


def _named_by_the_run(fixes: _Fixes, cls: Classification, psig: list[Signal], logs: list[LogEvidence],
                      inv: ArtifactInventory | None) -> None:
    """Fixes the run's circumstances call for: an OOM during evaluation, a collective that failed with no rank's
    own error, a crash with (or without) a valid checkpoint to resume from."""
    primary = cls.primary
    if primary is FailureClass.OOM and _oom_at_eval(cls, logs):
        fixes.why = "the out-of-memory came during evaluation"
        fixes.add("eval-batch-size", 1.0)
    if primary is FailureClass.NCCL_DISTRIBUTED and not any(s.role.value == "cause" for s in psig if s.kind != "anomaly"):
        fixes.why = "a collective failed, and no rank's own error says why"
        fixes.add("find-first-failing-rank", 1.0)
    if primary in (FailureClass.PROCESS_CRASH, FailureClass.OOM, FailureClass.IO_CHECKPOINT, FailureClass.STALLED, FailureClass.NCCL_DISTRIBUTED):
        if inv is not None and inv.newest_valid_checkpoint:
            fixes.why = f"a valid checkpoint: {inv.newest_valid_checkpoint}"
            fixes.add("resume-valid-checkpoint", 0.9 if primary in (FailureClass.PROCESS_CRASH, FailureClass.IO_CHECKPOINT) else 0.6)
        elif inv is not None and not inv.checkpoints:
            fixes.why = f"no checkpoint in {inv.root}"
            fixes.add("save-periodically", 0.9)


def _usual_fixes(fixes: _Fixes, primary: FailureClass) -> None:
    """No evidence named a fix: the class's usual ones, said to be that."""
    fixes.why = f"a usual fix for {primary.value}; nothing in the evidence names a more specific one"
    for fid, tpl in fix_catalog().items():
        if primary in tpl.classes and fid not in NEEDS_EVIDENCE:
            fixes.add(fid, 0.4)


def _named_by_contributing(fixes: _Fixes, cls: Classification, signals: list[Signal], sig_by_id: dict[str, Signature]) -> None:
    """For each contributing class, the first fix its own strongest signal names."""
    for extra in cls.contributing:
        top = max((x for x in signals if x.failure_class is extra and x.kind == "signature" and x.label in sig_by_id),
                  key=lambda x: x.weight, default=None)
        if top is not None and sig_by_id[top.label].fixes:
            fixes.why = f"contributing factor {extra.value}: {top.label} at {_where(top.source, top.line_no)}"
            fixes.add(sig_by_id[top.label].fixes[0], 0.3)


def _candidates(cls: Classification, signals: list[Signal], logs: list[LogEvidence],
                inv: ArtifactInventory | None) -> dict[str, tuple[float, str]]:
    """fix id -> (how sure we are that it addresses this failure (0-1), the evidence that named it)."""
    sig_by_id = {s.id: s for s in signatures()}
    fixes = _Fixes()
    primary = cls.primary
    psig = sorted((s for s in signals if s.failure_class == primary), key=lambda s: -s.weight)
    _named_by_primary_signals(fixes, psig, sig_by_id)
    _named_by_anomalies(fixes, primary, logs)
    _named_by_the_run(fixes, cls, psig, logs, inv)
    if not fixes.cand and primary is not None:
        _usual_fixes(fixes, primary)
    if not (inv is not None and inv.newest_valid_checkpoint):
        fixes.cand.pop("resume-valid-checkpoint", None)  # nothing valid to resume from
    _named_by_contributing(fixes, cls, signals, sig_by_id)
    return fixes.cand


def _prerequisites(cls: Classification, signals: list[Signal]) -> set[str]:
    """Fixes the strongest signal of the primary class lists before 'resume': they must come first.

    A full disk or a read-only mount lists freeing space before resuming; resuming first would
    fail at the next save. A crash or a truncated checkpoint lists resuming first: no prerequisite.
    """
    sig_by_id = {s.id: s for s in signatures()}
    rules = {r.id: r for r in exception_rules()}
    top = max((s for s in signals if s.failure_class == cls.primary), key=lambda s: s.weight, default=None)
    if top is None:
        return set()
    rid = top.label.split(":", 1)[-1]
    named = sig_by_id[rid].fixes if rid in sig_by_id else rules[rid].fixes if top.kind == "traceback" and rid in rules else []
    if "resume-valid-checkpoint" in named:
        return set(named[: named.index("resume-valid-checkpoint")])
    # a storage failure whose own fixes do not include resuming (a read-only output): fix it first
    return set(named) if cls.primary is FailureClass.IO_CHECKPOINT else set()


# an evaluation pass before the OOM: its progress line, or a traceback frame of an evaluation function
_EVAL_CONTEXT = lazy(r"(?i)(running evaluation|\beval(uat(e|ing|ion))?\b|validation|validating|val_dataloader|"
                           r"\bin (eval\w*|evaluat\w*|valid\w*|test(_step|_epoch|ing)?|predict\w*|inference\w*)$)")


def _oom_at_eval(cls: Classification, logs: list[LogEvidence]) -> bool:
    if cls.decisive is None:
        return False
    for log in logs:
        if log.source != cls.decisive.source or log.tail is None:
            continue
        rel = cls.decisive.line_no - log.tail.start_line
        window = log.tail.lines[max(0, rel - 40) : max(0, rel)] if rel >= 0 else []
        if any(_EVAL_CONTEXT.search(w) for w in window):
            return True
    return False


_UNREACHABLE = lazy(r"(?i)couldn't connect|could not connect|connection|timed? ?out|offline|resolve|proxy|\bSSL|max retries|unreachable")
# the program cannot fit at all: XLA's static buffer assignment at compile time says how much it needs, before any step
_COMPILE_OOM = lazy(r"(?i)BufferAssignment|compile permanent error|Ran out of memory in memory space|during compilation|while compiling")


_OWN_CHECKPOINT = lazy(r"(?i)\bresum|\brestor|history checkpoint|(latest|last|previous) checkpoint")


def _lines_before(ref: LineRef, logs: list[LogEvidence], n: int) -> list[str]:
    for log in logs:
        if log.source == ref.source and log.tail is not None:
            rel = ref.line_no - log.tail.start_line
            return log.tail.lines[max(0, rel - n) : rel + 1] if rel >= 0 else []
    return []


def _lines_after(ref: LineRef, logs: list[LogEvidence], n: int) -> list[str]:
    for log in logs:
        if log.source == ref.source and log.tail is not None:
            rel = ref.line_no - log.tail.start_line
            return log.tail.lines[rel + 1 : rel + 1 + n] if rel >= 0 else []
    return []


def _fits_the_device(cls: Classification, logs: list[LogEvidence]) -> str | None:
    """Why a larger accelerator is not the fix (None when it is): it is only when the model cannot fit this one at all."""
    if cls.decisive is None:
        return "no out-of-memory line to read the size from"
    ran = next((lp for log in logs if log.source == cls.decisive.source and (lp := log.trajectory.last_progress) is not None), None)
    if ran is not None:
        return f"training ran before the out-of-memory (progress at {_where(ran.source, ran.line_no)}): the model fits at some size"
    if _placing_model(cls, logs) is not None:
        return None  # the weights alone did not fit the device
    text = "\n".join([cls.decisive.text, *_lines_after(cls.decisive, logs, 3)])  # XLA prints its buffer assignment below the error
    if _COMPILE_OOM.search(text):
        return None
    return "the out-of-memory line does not say the program cannot fit the device at all (as a compile-time buffer assignment does)"


_OOM_NUMBERS = lazy(r"([\d.]+) GiB already allocated.*?([\d.]+) GiB reserved in total")
_OOM_UNALLOCATED = lazy(r"([\d.]+) GiB is allocated by PyTorch, and ([\d.]+) (GiB|MiB) is reserved by PyTorch but unallocated")


def _ruled_out_by_facts(fid: str, facts: list[RunFact]) -> str | None:
    """Why the fix does not apply to this run, from what the run printed about itself; None when it may."""
    f = fix_catalog()[fid]
    for name, values in f.not_when.items():
        got = fact(facts, name)
        if got is not None and got.value in values:
            return f"{name} is {got.value} ({_where(got.source or '', got.line_no)})"
    torch = fact(facts, "torch_version")
    if f.min_torch and torch is not None and version_below(torch.value, f.min_torch):
        return f"torch {torch.value} is older than {f.min_torch} ({_where(torch.source or '', torch.line_no)})"
    return None


# where a model's weights are put on the device: Module.to/.cuda (nn.Module._apply), accelerate's dispatch and
# set_module_tensor_to_device, transformers' from_pretrained and its meta-model load, a state dict loaded onto the GPU
_PLACING = lazy(r"(?m):(set_module_tensor_to_device|dispatch_model|load_checkpoint_and_dispatch|_load_state_dict_into_meta_model|"
                r"from_pretrained|load_state_dict|_apply|cuda|to|_move_model_to_device|model_to_device)\s*$")
_NO_BATCH_YET = ("reduce-batch-grad-accum", "activation-checkpointing", "eval-batch-size")


def _placing_model(cls: Classification, logs: list[LogEvidence]) -> str | None:
    """The frame that was putting the model's weights on the device when it ran out of memory, before any step."""
    if cls.decisive is None or cls.primary is not FailureClass.OOM:
        return None
    for log in logs:
        if log.source != cls.decisive.source or log.trajectory.last_progress is not None:
            continue
        tb = next((t for t in log.tracebacks if t.line_no == cls.decisive.line_no), None)
        frames = [f for f in (tb.frames if tb else []) if not f.startswith(" ")]  # 'file:function', not the code lines
        if frames and (m := _PLACING.search(frames[-1])):
            return f"{frames[-1].rsplit('/', 1)[-1].split(':', 1)[0]}:{m.group(1)}"
    return None


def _ruled_out_by_evidence(fid: str, cls: Classification, logs: list[LogEvidence]) -> str | None:
    """Fixes a signature names in general that the decisive line itself contradicts."""
    if fid in _NO_BATCH_YET and (where := _placing_model(cls, logs)) is not None:
        return (f"the out-of-memory came while placing the model's weights on the device ({where}), before any step: "
                "no batch or activation exists yet to shrink")
    if fid == "eval-batch-size" and not _oom_at_eval(cls, logs):
        return "the out-of-memory did not come during evaluation"
    if fid == "offline-local-model" and not (cls.decisive is not None and _UNREACHABLE.search(cls.decisive.text)):
        return "the failing line does not say the Hub could not be reached"
    if fid == "larger-accelerator":
        return _fits_the_device(cls, logs)
    if fid == "redownload-verify-file" and cls.decisive is not None:
        around = _lines_before(cls.decisive, logs, 40) + _lines_after(cls.decisive, logs, 40)  # the load's context, its traceback
        own = next((x for x in around if _OWN_CHECKPOINT.search(x)), None)
        if own is not None:
            return "the file is the run's own checkpoint, being resumed from, not a download"
    if fid == "expandable-segments" and cls.decisive is not None:
        old, new = _OOM_NUMBERS.search(cls.decisive.text), _OOM_UNALLOCATED.search(cls.decisive.text)
        if old:
            allocated, spare = float(old.group(1)), float(old.group(2)) - float(old.group(1))
        elif new:
            allocated, spare = float(new.group(1)), float(new.group(2)) / (1024 if new.group(3) == "MiB" else 1)
        else:
            return None
        if spare < 0.1 * allocated:
            return f"only {spare:.2f} GiB is reserved but unallocated: little fragmentation to recover"
    return None


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


def _ranked(cls: Classification, signals: list[Signal], logs: list[LogEvidence], inv: ArtifactInventory | None, launch_command: str | None,
            *, risk_of: RiskOf, completed_clean: bool, facts: list[RunFact]) -> tuple[list[Fix], list[str]]:
    if cls.primary is None:  # a clean finished run has nothing to fix, only outputs to check; otherwise evidence is missing
        f = fix_catalog()["verify-outputs" if completed_clean else "collect-more-evidence"]
        risk, rule = risk_of(f.kind)
        run_dir = inv.root if inv else next((str(Path(x.source).parent) for x in logs if Path(x.source).is_absolute()), None)
        cmd = f"ml-skills verify-artifacts {shlex.quote(run_dir)}" if completed_clean and run_dir else None
        return [Fix(rank=1, fix_id=f.id, action=f.action, kind=f.kind, risk=risk, risk_rule=rule, expected_impact=f.impact,
                    time_to_try=f.time_to_try, validation=f.validation, command=cmd)], [cmd] if cmd else []
    cand = {fid: cw for fid, cw in _candidates(cls, signals, logs, inv).items()
            if _ruled_out_by_facts(fid, facts) is None and _ruled_out_by_evidence(fid, cls, logs) is None}
    before = _prerequisites(cls, signals)
    scored = []
    for fid, (conf, because) in cand.items():
        f = fix_catalog()[fid]
        risk, rule = risk_of(f.kind)
        score = IMPACT[f.impact] * conf * max(cls.confidence, 0.3) / RISK_COST[risk]
        scored.append((score, fid, f, risk, rule, because))
    scored.sort(key=lambda t: (-t[0], t[1]))
    if before:  # resuming before the storage or config is fixed would fail the same way again
        pre = [t for t in scored if t[1] in before]
        scored = pre + [t for t in scored if t[1] not in before]
    out: list[Fix] = []
    commands: list[str] = []
    for rank, (_, fid, f, risk, rule, because) in enumerate(scored[:MAX_FIXES], start=1):
        cmd = _command_for(fid, inv, launch_command, logs, facts)
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
    why = f"the loss went non-finite at {_where(nan.source, nan.line_no)} and the {where} is still running"
    if finite:
        last = finite[-1]
        why += f"; the last good checkpoint is {last.value.split(' (step')[0]} ({_where(last.source or '', last.line_no)})"
        if onset is not nan and (last.line_no or 0) > (onset.line_no or 0):  # saved while the loss was already blowing up
            why += f", saved after the loss began to blow up at {_where(onset.source, onset.line_no)}: check it, an older one may be needed"
    if after:
        why += f"; {len(after)} save(s) since the NaN already"
    if every:
        why += f"; it saves every {every} steps, next at step {steps[-1] + every}"
    cmd = None
    if live.kind == "process" and live.name.isdigit():
        cmd = (f"kill -STOP {live.name}   # pauses it before its next save; kill -CONT {live.name} undoes it, "
               f"kill -TERM {live.name} ends it once the good checkpoint is copied aside")
    return why, cmd


_RESUME_FLAG = lazy(r"--(?:resume[\w-]*|resume_from_checkpoint|ckpt_path|load_checkpoint|checkpoint|init_from|restore[\w-]*)")
_LR_FLAG = lazy(r"--(?:lr|learning[-_]rate)")
_NUMBER = lazy(r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?")
_OPERATOR = set("();<>|&")


def launch_words(launch_command: str) -> list[str] | None:
    """The words of a launch command, or None when it is not one simple command.

    The command comes from the run's own files or log, which anyone who can print a line can
    write: `python train.py --lr 0.1; curl ... | sh` is a launch line followed by a second
    command. A line with a shell operator outside quotes (`;`, `&&`, `|`, `>`, a subshell) is not
    a launch we rebuild; every command built from one is `shlex.join` of its words, so nothing in
    it (`$(...)`, backticks, `$VAR`) is run by the shell that pastes it."""
    lex = shlex.shlex(launch_command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        words = list(lex)
    except ValueError:  # an unclosed quote
        return None
    if not words or any(w and set(w) <= _OPERATOR for w in words) or any("\n" in w or "\r" in w for w in words):
        return None
    return words


def safe_launch(launch_command: str | None) -> str | None:
    """The launch command re-quoted word by word (see launch_words), or None when it is not one simple command."""
    words = launch_words(launch_command) if launch_command else None
    return shlex.join(words) if words else None


def resume_command(launch_command: str, ckpt: str) -> str | None:
    """The original command with its resume flag pointed at `ckpt`, or None if it has no such flag."""
    words = launch_words(launch_command)
    for i, w in enumerate(words or []):
        flag, eq, _ = w.partition("=")
        if not _RESUME_FLAG.fullmatch(flag):
            continue
        assert words is not None
        if eq:
            words[i] = f"{flag}={ckpt}"
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            words[i + 1] = ckpt
        else:
            words.insert(i + 1, ckpt)
        return shlex.join(words)
    return None


def lower_lr_command(launch_command: str, factor: float = 3.0) -> str | None:
    """The original command with its learning-rate flag divided by `factor`, or None if it has none."""
    words = launch_words(launch_command)
    for i, w in enumerate(words or []):
        flag, eq, value = w.partition("=")
        if not _LR_FLAG.fullmatch(flag):
            continue
        assert words is not None
        if eq and _NUMBER.fullmatch(value):
            words[i] = f"{flag}={float(value) / factor:.3g}"
        elif not eq and i + 1 < len(words) and _NUMBER.fullmatch(words[i + 1]):
            words[i + 1] = f"{float(words[i + 1]) / factor:.3g}"
        else:
            continue
        return shlex.join(words)
    return None


def _script(launch: str | None) -> str | None:
    m = re.search(r"(\S+\.py)\b|-m\s+([\w.]+)", launch or "")
    return (m.group(1) or m.group(2)) if m else None


def _command_for(fid: str, inv: ArtifactInventory | None, launch: str | None, logs: list[LogEvidence],
                 facts: list[RunFact]) -> str | None:
    launch = safe_launch(launch or (lc.value if (lc := fact(facts, "launch_command")) else None))
    if fid == "lower-lr-add-warmup" and launch:
        cmd = lower_lr_command(launch)
        ckpt = inv.newest_valid_checkpoint if inv else None
        if cmd and ckpt:
            cmd = resume_command(cmd, ckpt) or cmd
        return cmd
    if fid == "dump-stacks":
        script = _script(launch)
        target = f"pgrep -f {shlex.quote(script)}" if script else "pgrep -f python"
        return f"for p in $({target}); do py-spy dump --pid $p; done   # one stack per process (pip install py-spy)"
    if fid == "resume-valid-checkpoint" and inv and inv.newest_valid_checkpoint:
        if launch:
            cmd = resume_command(launch, inv.newest_valid_checkpoint)
            if cmd:
                return cmd
            return f"{launch}  # add your trainer's resume flag pointing at {shlex.quote(inv.newest_valid_checkpoint)}"
        return f"# resume from {shlex.quote(inv.newest_valid_checkpoint)} with the original, unchanged command"
    if fid == "check-kernel-oom":
        return "dmesg -T | grep -i -E 'killed process|out of memory|oom-kill'"
    if fid == "nccl-debug" and launch:
        return f"NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET TORCH_DISTRIBUTED_DEBUG=DETAIL {launch}"
    if fid == "cuda-launch-blocking" and launch:
        return f"CUDA_LAUNCH_BLOCKING=1 {launch}"
    if fid == "faulthandler-stack" and launch:
        return f"PYTHONFAULTHANDLER=1 {launch}"
    if fid == "check-gpu-health":
        return "nvidia-smi -q -d ECC,PAGE_RETIREMENT; dmesg -T | grep -i xid"
    if fid == "find-first-failing-rank" and len(logs) > 1:
        return "grep -n -m1 -E 'Error|Traceback|Killed' " + " ".join(shlex.quote(x.source) for x in logs)
    return None
