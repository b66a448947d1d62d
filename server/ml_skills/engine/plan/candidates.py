"""The fixes the evidence names, and how sure each naming is: the decisive signature and the primary class's other
signals, the NaN's onset, the anomalies, the run's own facts, the contributing classes, and the class's usual fixes.
"""

from __future__ import annotations

from ml_skills.catalog.loader import exception_rules, signatures
from ml_skills.catalog.loader import fixes as fix_catalog
from ml_skills.engine.classify.cascades import EXTERNAL_KILL
from ml_skills.engine.classify.signals import Signal
from ml_skills.engine.plan.shared_gpu import others_holding
from ml_skills.lazyre import lazy
from ml_skills.models import (
    Anomaly,
    AnomalyKind,
    ArtifactInventory,
    Classification,
    FailureClass,
    LogEvidence,
    NanOnset,
    Signature,
)

STOP_BEFORE_SAVE = "stop-before-next-save"
POSITION_STEP = 0.15  # a signature lists its fixes most likely first: each later one is that much less sure
# fixes that only make sense when specific evidence names them, never as a class default
# fixes for signals the engine derives (not catalog signatures): an external SIGKILL leaves the
# code and data intact, so resuming is the recovery; confirming it was not the OOM killer is cheap
DERIVED_FIXES = {EXTERNAL_KILL: ["resume-valid-checkpoint", "check-kernel-oom", "save-on-signal"],
                 # the launch's own `timeout` ended a run that was still stepping: its budget was too small
                 AnomalyKind.LAUNCH_TIME_LIMIT.value: ["raise-time-limit", "save-periodically", "resume-valid-checkpoint"]}
NEEDS_EVIDENCE = {"collect-more-evidence", "verify-outputs", "resume-valid-checkpoint", "fix-launch-command", "check-train-data-coverage",
                  "eval-batch-size", "expandable-segments", "free-shared-gpu", "dedupe-splits", "check-split-overlap", "raise-collective-timeout", "exclude-node",
                  "one-gpu-per-rank", "configure-experiment-tracker", STOP_BEFORE_SAVE}  # a tracker fix needs a tracker in the evidence


def file_line(source: str, line_no: int | None) -> str:
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


_QUOTA = lazy(r"(?i)quota|\blimit(s)? (exceeded|reached)|\bexceed(s|ed|ing)? (the )?[\w ]{0,30}limit")
_PERMISSION = lazy(r"(?i)permission|forbidden|\b403\b|access ?denied|not authori[sz]ed|unauthori[sz]ed|assume (the )?role")


def _quota_first(text: str, named: list[str]) -> list[str]:
    """A refusal wording that covers both a missing permission and a full quota names its remedy by its words: a line
    that speaks of quota and not of permission asks for quota before a role."""
    q, g = "request-quota-or-region", "grant-iam-role"
    if q in named and g in named and named.index(g) < named.index(q) and _QUOTA.search(text) and not _PERMISSION.search(text):
        named = [q if f == g else g if f == q else f for f in named]
    return named


def named_by(s: Signal, sig_by_id: dict[str, Signature] | None = None) -> list[str]:
    """The fixes one signal lists, most likely first: its signature's, its exception rule's, or a derived signal's."""
    sig_by_id = sig_by_id if sig_by_id is not None else {x.id: x for x in signatures()}
    rules = {r.id: r for r in exception_rules()}
    if s.label in DERIVED_FIXES:
        return DERIVED_FIXES[s.label]
    if s.kind == "signature" and s.label in sig_by_id:
        return _quota_first(s.text, sig_by_id[s.label].fixes)
    if s.kind == "traceback":
        rid = s.label.split(":", 1)[1]
        return rules[rid].fixes if rid in rules else sig_by_id[rid].fixes if rid in sig_by_id else []
    if s.kind == "stop" and ":" in s.label:  # a cut traceback read by a where-it-was-raised rule (stops.py)
        return rules[s.label.split(":", 1)[1]].fixes
    return []


def _named_by_primary_signals(fixes: _Fixes, psig: list[Signal], sig_by_id: dict[str, Signature]) -> None:
    """The fixes the primary class's four strongest signals list (signature, exception rule or derived signal),
    each later one in a list a little less sure."""
    for rank, s in enumerate(psig[:4]):
        base = 1.0 if rank == 0 else 0.8
        fixes.why = f"{s.label} at {file_line(s.source, s.line_no)}"
        for i, f in enumerate(named_by(s, sig_by_id)):
            fixes.add(f, base - POSITION_STEP * i)


def _named_by_nan_onset(fixes: _Fixes, nan: Anomaly) -> None:
    """Where the first NaN came says what to fix: validation only, early (the learning rate), every fp16 step skipped
    (precision), after the lr jumped (the schedule), after exploding gradients, or late (one bad batch). Read from the
    finding's onset, never its words: the words quote the log."""
    add = fixes.add
    if nan.failure_class is FailureClass.EVALUATION_MISMATCH or nan.onset is NanOnset.VALIDATION_ONLY:
        add("fix-eval-config", 1.0)
    elif nan.onset is NanOnset.EARLY:
        add("lower-lr-add-warmup", 1.0); add("bf16-or-loss-scaling", 0.95); add("grad-clipping", 0.7)
        cand = fixes.cand
        if "find-bad-batch" in cand:  # early NaN is rarely one batch
            cand["find-bad-batch"] = (min(cand["find-bad-batch"][0], 0.3), cand["find-bad-batch"][1])
    elif nan.onset is NanOnset.EVERY_STEP_SKIPPED:  # fp16 overflowed at every step: not the learning rate or one batch
        add("bf16-or-loss-scaling", 1.0); add("guard-numerics", 0.8); add("lower-lr-add-warmup", 0.6)
    elif nan.onset is NanOnset.LEARNING_RATE_JUMP:  # the step size jumped: the schedule, then the steps around it
        add("fix-lr-schedule", 1.0); add("resume-before-spike", 0.9); add("grad-clipping", 0.7)
    elif nan.onset is NanOnset.GRADIENT_EXPLOSION:
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
            fixes.why = f"{kind.value} at {file_line(first[kind].source, first[kind].line_no)}"
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
    if seen(AnomalyKind.EVAL_ON_TRAIN_DATA) and primary is FailureClass.EVALUATION_MISMATCH:
        add("fix-eval-config", 1.0); add("check-split-overlap", 0.8)
    if seen(AnomalyKind.LR_ZERO):
        add("fix-lr-schedule", 1.0)
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
    if primary is FailureClass.OOM and oom_at_eval(cls, logs):
        fixes.why = "the out-of-memory came during evaluation"
        fixes.add("eval-batch-size", 1.0)
    if primary is FailureClass.OOM and cls.decisive is not None and (held := others_holding(cls.decisive.text)) is not None:
        others, total, pids = held
        fixes.why = f"process {', '.join(pids)} held {others:.1f} of the GPU's {total:.1f} GiB when it ran out of memory"
        fixes.add("free-shared-gpu", 1.05)  # before shrinking a run that may fit a device of its own
    if primary is FailureClass.NCCL_DISTRIBUTED and not any(s.role.value == "cause" for s in psig if s.kind != "anomaly"):
        fixes.why = "a collective failed, and no rank's own error says why"
        fixes.add("find-first-failing-rank", 1.0)
        if not any(log.trajectory.metric_lines or log.trajectory.last_progress or log.saved_lines for log in logs) and not _collectives_ran(psig):
            # ranks that never logged a step may never have connected: the transport (InfiniBand absent or
            # misconfigured, the wrong interface, a firewall) before any desync in training
            fixes.why = "a collective failed before the run logged any training step or save"
            fixes.add("check-network-transport", 0.9)
    if primary in (FailureClass.PROCESS_CRASH, FailureClass.OOM, FailureClass.IO_CHECKPOINT, FailureClass.STALLED, FailureClass.NCCL_DISTRIBUTED):
        if inv is not None and inv.newest_valid_checkpoint:
            fixes.why = f"a valid checkpoint: {inv.newest_valid_checkpoint}"
            fixes.add("resume-valid-checkpoint", 0.9 if primary in (FailureClass.PROCESS_CRASH, FailureClass.IO_CHECKPOINT) else 0.6)
        elif inv is not None and not inv.checkpoints:
            fixes.why = f"no checkpoint in {inv.root}"
            fixes.add("save-periodically", 0.9)


_SEQ = lazy(r"\bSeqNum=(\d{1,12})")
CONNECTED_AFTER = 10  # a collective numbered past this one says the ranks had already exchanged data


def _collectives_ran(psig: list[Signal]) -> bool:
    """Whether a failed collective's own sequence number (NCCL's watchdog 'SeqNum=28956') says many ran before it."""
    return any(int(m.group(1)) > CONNECTED_AFTER for s in psig for m in _SEQ.finditer(s.text))


# fixes that answer one narrow failure (a frozen base under checkpointing, a schedule's length, an evaluation's set-up,
# an offline hub): a class's usual fix only when its own evidence names it
NARROW = {"enable-input-grads", "fix-lr-schedule", "fix-eval-config", "offline-local-model"}
# what an error's own words say about where to look, when no rule placed it: its call (a signature the code does not
# match), the installed versions, or a configuration value
_CUES = (
    ("fix-call-site", lazy(r"(?i)unexpected keyword|missing \d+ required|takes \d+ positional|has no attribute|is not defined|"
                           r"\b(NameError|AttributeError|TypeError|UnboundLocalError)\b|object is not (callable|subscriptable|iterable)")),
    ("pin-environment", lazy(r"(?i)no module named|cannot import|\bImportError\b|undefined symbol|GLIBC\w*|\bversion\b|"
                             r"incompatible|requires? [\w.-]+ ?[<>=]=?|not compiled with|not supported by")),
    ("fix-config-key", lazy(r"(?i)\bconfig\w*|\bargument|\boption|\bflag\b|\bparameter|invalid (value|choice)|must be|expected one of")),
)


def _usual_fixes(fixes: _Fixes, primary: FailureClass, psig: list[Signal]) -> None:
    """No evidence named a fix: the class's usual ones, said to be that, those the error's own words point to first."""
    fixes.why = f"a usual fix for {primary.value}; nothing in the evidence names a more specific one"
    text = psig[0].text if psig else ""
    for fid, tpl in fix_catalog().items():
        if primary in tpl.classes and fid not in NEEDS_EVIDENCE and fid not in NARROW:
            fixes.add(fid, 0.4)
    for rank, (fid, rx) in enumerate(_CUES):
        if fid in fixes.cand and rx.search(text):
            fixes.why = f"a usual fix for {primary.value}, which the error's words point to: {psig[0].label} at {file_line(psig[0].source, psig[0].line_no)}"
            fixes.add(fid, 0.5 - 0.02 * rank)


def _named_by_contributing(fixes: _Fixes, cls: Classification, signals: list[Signal], sig_by_id: dict[str, Signature]) -> None:
    """For each contributing class, the first fix its own strongest signal names."""
    for extra in cls.contributing:
        top = max((x for x in signals if x.failure_class is extra and x.kind == "signature" and x.label in sig_by_id),
                  key=lambda x: x.weight, default=None)
        if top is not None and sig_by_id[top.label].fixes:
            fixes.why = f"contributing factor {extra.value}: {top.label} at {file_line(top.source, top.line_no)}"
            fixes.add(sig_by_id[top.label].fixes[0], 0.3)


def candidates(cls: Classification, signals: list[Signal], logs: list[LogEvidence],
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
        _usual_fixes(fixes, primary, psig)
    if not (inv is not None and inv.newest_valid_checkpoint):
        fixes.cand.pop("resume-valid-checkpoint", None)  # nothing valid to resume from
    _named_by_contributing(fixes, cls, signals, sig_by_id)
    return fixes.cand


# an evaluation pass before the OOM: its progress line, or a traceback frame of an evaluation function
_EVAL_CONTEXT = lazy(r"(?i)(running evaluation|\beval(uat(e|ing|ion))?\b|validation|validating|val_dataloader|"
                           r"\bin (eval\w*|evaluat\w*|valid\w*|test(_step|_epoch|ing)?|predict\w*|inference\w*)$)")


def oom_at_eval(cls: Classification, logs: list[LogEvidence]) -> bool:
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
