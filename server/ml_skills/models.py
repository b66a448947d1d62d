"""Typed values that cross the boundaries between stages (design.md, "The flow of data").

Every stage is a plain function from these models to these models. The report written as
check-failed-run.json is `Diagnosis`; its JSON schema is generated from it (gen.py).
"""

# No `from __future__ import annotations` here: pydantic would then make a ForwardRef of each of the 240 field
# annotations (a compile() each) and evaluate it again; as objects they cost nothing more when the classes are built.

import re
import time
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from typing import Annotated, Any, Protocol

from ml_skills.modelkit import BaseModel, ConfigDict, Field, WithJsonSchema
from ml_skills.targets import TargetKind

LogTime = Annotated[datetime, WithJsonSchema({"type": "string", "description": "ISO 8601 time as the log wrote it; without an offset it is the run's local time."})]
"""A time read from a log line: often naive, so its schema is not 'date-time' (which requires an offset)."""


class Progress(Protocol):
    """Told how far long work has got (a multi-GB scan, a poll), so stages never print: render/progress.py draws it.

    progress(what, done, total, unit): unit is "B" (bytes) or "s" (seconds); total None when unknown.
    """

    def __call__(self, what: str, done: float, total: float | None, unit: str, /) -> None: ...


def wait(seconds: float, what: str, progress: Progress | None, sleep: Callable[[float], None] = time.sleep) -> None:
    """Sleep `seconds`, telling `progress` (when there is one) how much of the wait has passed, about every second."""
    if progress is None:
        sleep(seconds)
        return
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        progress(what, seconds - left, seconds, "s")
        sleep(min(1.0, left))
    progress(what, seconds, seconds, "s")


def new_list() -> list[Any]:
    """`default_factory=list` as a Python function. Pydantic reads every default factory's signature when it builds a
    model; a builtin's is parsed from its text signature with `tokenize` (0.2 ms), a function's is read off its code
    (0.02 ms): 8 ms of every start over this module's fields."""
    return []


def new_dict() -> dict[Any, Any]:
    """`default_factory=dict`, for the reason given under new_list."""
    return {}


class Model(BaseModel):
    """Base for every boundary type: unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- vocabulary (closed sets)


class FailureClass(StrEnum):
    NAN_INF = "nan-inf"
    OOM = "oom"
    OPTIMIZATION_DIVERGENCE = "optimization-divergence"
    CUDA_RUNTIME = "cuda-runtime"
    NCCL_DISTRIBUTED = "nccl-distributed"
    DATA_PIPELINE = "data-pipeline"
    CONFIG_ERROR = "config-error"
    IO_CHECKPOINT = "io-checkpoint"
    STALLED = "stalled"
    PROCESS_CRASH = "process-crash"
    EVALUATION_MISMATCH = "evaluation-mismatch"
    PIPELINE_ORCHESTRATION = "pipeline-orchestration"
    CLOUD_PERMISSIONS_QUOTA = "cloud-permissions-quota"


class RunStatus(StrEnum):
    CRASHED = "crashed"
    HUNG = "hung"
    DEGRADED = "degraded"
    DIVERGED = "diverged"
    RECOVERED = "recovered"
    COMPLETED = "completed"
    RUNNING = "running"
    UNKNOWN = "unknown"


class Risk(StrEnum):
    SAFE = "safe"
    NEEDS_APPROVAL = "needs-approval"
    DANGEROUS = "dangerous"


class Decision(StrEnum):
    GO = "GO"
    NO_GO = "NO-GO"


class Severity(StrEnum):
    """How much a signature says about a failure: critical ends runs, info is context."""

    CRITICAL = "critical"
    SIGNIFICANT = "significant"
    MINOR = "minor"
    INFO = "info"


class Role(StrEnum):
    """Where a signature sits in a failure cascade.

    cause: self-describing error that is usually the root (CUDA OOM, device-side assert).
    symptom: what other failures look like from outside (NCCL watchdog timeout after a peer died,
    torchrun ChildFailedError, exit code 1); it points at a class but defers to any cause.
    hint: context that only tilts the balance (fp16 loss-scale overflow warnings).
    """

    CAUSE = "cause"
    SYMPTOM = "symptom"
    HINT = "hint"


class Framework(StrEnum):
    PYTORCH = "pytorch"
    LIGHTNING = "lightning"
    DEEPSPEED = "deepspeed"
    FSDP = "fsdp"
    HF_TRAINER = "hf-trainer"
    TENSORFLOW = "tensorflow"
    JAX = "jax"
    MEGATRON = "megatron"
    RAY = "ray"
    KUBEFLOW = "kubeflow"
    VERTEX = "vertex"
    OTHER = "other"  # a framework or platform outside this list; Diagnosis.framework_detail names it
    UNKNOWN = "unknown"


class Task(StrEnum):
    CLASSIFICATION = "classification"
    REGRESSION = "regression"
    LANGUAGE_MODELING = "language-modeling"


class Level(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class FindingSeverity(StrEnum):
    BLOCKER = "blocker"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class EvidenceStatus(StrEnum):
    OK = "ok"
    NO_DATA = "no_data"
    PARTIAL = "partial"
    ERROR = "error"


class ActionKind(StrEnum):
    """Typed recovery actions, each with a built-in Risk (DEFAULT_RISK) that a policy file may adjust; unknown is dangerous."""

    INSPECT = "inspect"  # read-only diagnostics, fetching logs or artifacts
    REPOINT_CHECKPOINT = "repoint-checkpoint"  # resume from an existing valid checkpoint
    RESTART_UNCHANGED = "restart-unchanged"  # same command, nothing edited
    CHANGE_HYPERPARAMETER = "change-hyperparameter"
    CHANGE_CONFIG = "change-config"  # launch flags, environment, resources, batch size
    CHANGE_CODE = "change-code"  # edit training code (a guard, a fix, an assertion)
    DATA_FILTER = "data-filter"  # filter or transform data
    RESUBMIT_PIPELINE = "resubmit-pipeline"
    CANCEL_CLOUD_JOB = "cancel-cloud-job"
    CHANGE_CLOUD_IAM_QUOTA = "change-cloud-iam-quota"
    KILL_WORKER = "kill-worker"
    RESTART_DISTRIBUTED = "restart-distributed"
    ROLLBACK = "rollback"  # code or checkpoint
    DELETE_CHECKPOINT = "delete-checkpoint"
    DELETE_RUN = "delete-run"
    OVERWRITE_OUTPUT = "overwrite-output"


DEFAULT_RISK: dict[ActionKind, tuple[Risk, str]] = {
    ActionKind.INSPECT: (Risk.SAFE, "read-only diagnostics and fetching logs or artifacts change nothing"),
    ActionKind.REPOINT_CHECKPOINT: (Risk.SAFE, "re-pointing a resume pointer to an existing, structurally valid checkpoint loses nothing: the old content is kept and the change is undone by writing it back"),
    ActionKind.RESTART_UNCHANGED: (Risk.NEEDS_APPROVAL, "restarting starts a process (possibly distributed workers or a paid job): the person sees the exact recorded command and approves it"),
    ActionKind.CHANGE_HYPERPARAMETER: (Risk.NEEDS_APPROVAL, "hyperparameter changes alter the experiment"),
    ActionKind.CHANGE_CONFIG: (Risk.NEEDS_APPROVAL, "configuration and resource changes alter the experiment or its cost"),
    ActionKind.CHANGE_CODE: (Risk.NEEDS_APPROVAL, "code changes alter what is trained"),
    ActionKind.DATA_FILTER: (Risk.NEEDS_APPROVAL, "data filtering or transforms change what the model learns from"),
    ActionKind.RESUBMIT_PIPELINE: (Risk.NEEDS_APPROVAL, "re-submitting or mutating a pipeline spends money and changes remote state"),
    ActionKind.CANCEL_CLOUD_JOB: (Risk.NEEDS_APPROVAL, "cancelling a long-running cloud job throws away its progress"),
    ActionKind.CHANGE_CLOUD_IAM_QUOTA: (Risk.NEEDS_APPROVAL, "IAM and quota changes alter who can do what and what it costs"),
    ActionKind.KILL_WORKER: (Risk.NEEDS_APPROVAL, "killing a worker ends work in progress"),
    ActionKind.RESTART_DISTRIBUTED: (Risk.NEEDS_APPROVAL, "restarting distributed workers ends work in progress on every rank"),
    ActionKind.ROLLBACK: (Risk.NEEDS_APPROVAL, "rolling back code or checkpoints discards later work"),
    ActionKind.DELETE_CHECKPOINT: (Risk.DANGEROUS, "deleting checkpoints destroys training history"),
    ActionKind.DELETE_RUN: (Risk.DANGEROUS, "deleting runs or model versions destroys history"),
    ActionKind.OVERWRITE_OUTPUT: (Risk.DANGEROUS, "overwriting an output prefix destroys earlier results"),
}


def builtin_risk(kind: ActionKind | str) -> tuple[Risk, str]:
    """Risk of an action kind by the built-in table, and the rule that decided it; anything unknown is dangerous."""
    try:
        k = ActionKind(kind)
    except ValueError:
        return Risk.DANGEROUS, f"unknown action '{kind}': unknown actions are dangerous"
    risk, why = DEFAULT_RISK[k]
    return risk, f"{k.value}: {why}"


RiskOf = Callable[[str], tuple[Risk, str]]
"""risk(action kind) -> (level, the rule that decided it): how the planner learns the risk of each fix. The faces
pass the loaded policy's (policy/rules.py), so a report and `request_action` judge an action by the same file."""


# ---------------------------------------------------------------- metric names
# One vocabulary for every metric source: a log line's keys (engine/read/metrics.py) and a tracker's
# history keys (collectors/tracker.py) are folded into these canonical names, so the same
# trajectory detectors read both.

CANONICAL = ("loss", "val_loss", "grad_norm", "lr", "throughput", "acc", "val_acc", "mem", "step_time", "loss_scale")

_NAMES: dict[str, list[str]] = {
    "loss": ["loss", "train_loss", "training_loss", "lm_loss", "total_loss", "train/loss", "loss_step",
             "train_loss_step", "avg_loss", "train/loss_step", "objective", "train/lm_loss", "mean_loss", "loss_epoch", "train_loss_epoch",
             "loss_total", "xent", "nll", "nll_loss", "lossvalue", "loss_value"],  # insightface's MXNet metric: lossvalue
    "val_loss": ["val_loss", "eval_loss", "validation_loss", "valid_loss", "val/loss", "eval/loss", "dev_loss",
                 "validation/loss", "val_lm_loss", "test_loss", "valid/loss", "val_loss_epoch"],
    # perplexity, exp of the token loss (OpenNMT's 'ppl:', fairseq's 'ppl', 'PPL 35.2'): non-finite exactly when the loss is
    "ppl": ["ppl", "perplexity", "train_ppl", "train_perplexity", "training_perplexity"],
    "val_ppl": ["val_ppl", "valid_ppl", "eval_ppl", "dev_ppl", "val_perplexity", "validation_perplexity", "valid_perplexity", "eval_perplexity"],
    "grad_norm": ["grad_norm", "gradient_norm", "gnorm", "total_norm", "grad/norm", "train/grad_norm", "grad_l2_norm", "global_norm"],
    "lr": ["lr", "learning_rate", "train/learning_rate", "lr-adamw", "lr-adam", "learningrate", "lr-sgd"],
    "throughput": ["samples/sec", "samples_per_second", "train_samples_per_second", "samples/s", "tokens/s",
                   "tok/s", "tokens_per_sec", "tokens/sec", "it/s", "throughput", "tflops", "mfu", "img/s", "images/sec", "examples/sec", "samples_per_sec"],
    "acc": ["acc", "accuracy", "train_acc", "train_accuracy", "top1", "train/acc", "acc@1", "prec@1", "top1_acc", "top-1", "training_accuracy", "training_acc",
            "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy"],  # Keras' own metric names
    "val_acc": ["val_acc", "val_accuracy", "eval_accuracy", "eval_acc", "valid_acc", "val/acc", "validation_accuracy", "test_acc", "val_top1", "val_f1", "eval_f1",
                "val_sparse_categorical_accuracy", "val_categorical_accuracy", "val_binary_accuracy"],
    "mem": ["mem", "memory", "rss", "rss_mb", "rss_gb", "mem_gb", "gpu_mem", "max_memory_allocated", "memory_allocated", "mem_mb", "peak_mem", "max_mem"],
    "step_time": ["time", "step_time", "iter_time", "iter_time_(s)", "elapsed_time_per_iteration_(ms)", "time/step", "sec/it", "s/it", "batch_time"],
    "loss_scale": ["loss_scale", "scale", "loss_scaler"],
    # a GAN's two losses (engine/analyse/gan.py): its generator's and its discriminator's, never its `loss`
    "g_loss": ["g_loss", "loss_g", "gen_loss", "generator_loss", "loss_gen", "loss_generator", "lossg", "errg", "g_loss_total"],
    "d_loss": ["d_loss", "loss_d", "dis_loss", "disc_loss", "discriminator_loss", "loss_dis", "loss_disc", "loss_discriminator",
               "lossd", "errd", "d_loss_total"],
    # a detector's box-regression loss (engine/analyse/boxloss.py): summed over proposals matched to a box
    "box_loss": ["loss_bbox", "loss_rpn_bbox", "box_loss", "bbox_loss", "loss_box_reg", "loss_rpn_box_reg", "loss_giou",
                 "loss_iou", "train/box_loss", "iou_loss", "reg_loss"],
}
ALIASES: dict[str, str] = {name: canon for canon, names in _NAMES.items() for name in names}

STEP_KEYS = {"step", "global_step", "iteration", "iter", "steps", "global_steps", "it", "train/global_step", "trainer/global_step", "batch", "update", "updates", "num_updates"}
EPOCH_KEYS = {"epoch", "epochs", "train/epoch"}


# MXNet's Module.fit logs `Epoch[3] Train-accuracy=0.92` and `Epoch[3] Validation-accuracy=0.51` (the metric's
# name after a Train-/Validation- prefix); its default metric names for the loss are cross-entropy and ce
_MXNET_SPLIT = {"train-": "", "validation-": "val_"}
_MXNET_NAMES = {"accuracy": "acc", "acc": "acc", "cross-entropy": "loss", "ce": "loss"}
# what Hugging Face's Trainer reports through W&B once training ends: the mean loss over the whole run (its final
# metrics' train_loss), not a step's; a falling loss reads as a rise to it
_RUN_AVERAGES = frozenset({"train/train_loss"})
# TensorBoard-style tags that group by metric and name the split last ('loss/train', 'accuracy/validation'), as
# SummaryWriter users write them and W&B prints them in its run summary
_SPLIT_SUFFIX = {"train": "", "training": "", "val": "val_", "valid": "val_", "validation": "val_", "eval": "val_", "dev": "val_"}


# XGBoost's evaluation lines name each watched set, then its metric ('[500]\teval-logloss:0.419\ttrain-logloss:0.160',
# 'validation_0-rmse'): a loss of the training set, or of a held-out one
_GBM_LOSSES = frozenset({"logloss", "mlogloss", "rmse", "mae", "rmsle", "mphe", "error", "merror", "l1", "l2", "mape", "huber"})
_GBM_TRAIN = frozenset({"train", "dtrain", "training"})
_GBM_HELD = frozenset({"eval", "valid", "validation", "val", "test", "dvalid", "dtest", "dval"})
_GBM_HELD_N = re.compile(r"(?:validation|valid|eval|test)_\d+$")


@lru_cache(maxsize=4096)  # a log repeats a few dozen keys on every line
def canonical(key: str) -> str | None:
    """The canonical name of a metric key ('train/loss' -> loss, 'Validation-accuracy' -> val_acc), or None."""
    k = key.strip().strip("'\"").lower().replace(" ", "_")
    if k in _RUN_AVERAGES:
        return None
    if k in ALIASES:
        return ALIASES[k]
    if k.endswith(("loss_bbox", "loss_box_reg")):  # a stage's or branch's ('s0.loss_bbox', 'd5.loss_bbox', 'unsup_loss_bbox')
        return "box_loss"
    for prefix, split in _MXNET_SPLIT.items():
        if k.startswith(prefix) and k[len(prefix):] in _MXNET_NAMES:
            return split + _MXNET_NAMES[k[len(prefix):]]
    for prefix in ("train/", "train_", "training/", "metrics/"):
        if k.startswith(prefix) and k[len(prefix):] in ALIASES and ALIASES[k[len(prefix):]] in ("loss", "grad_norm", "lr"):
            return ALIASES[k[len(prefix):]]
    name, _, split = k.rpartition("/")
    if split in _SPLIT_SUFFIX and ALIASES.get(name) in ("loss", "acc"):
        return _SPLIT_SUFFIX[split] + ALIASES[name]
    data, _, metric = k.partition("-")
    if metric in _GBM_LOSSES and (data in _GBM_TRAIN or data in _GBM_HELD or _GBM_HELD_N.match(data)):
        return "loss" if data in _GBM_TRAIN else "val_loss"
    return None


# ---------------------------------------------------------------- catalog


class SignatureExamples(Model):
    match: list[str] = Field(default_factory=new_list, description="Lines the pattern must match.")
    no_match: list[str] = Field(default_factory=new_list, description="Lines it must not match.")


class Signature(Model):
    """One failure signature of the catalog (catalog/signatures/<class>.toml)."""

    id: str
    failure_class: FailureClass
    pattern: str = Field(description="Regular expression, matched per line, case-sensitive unless (?i).")
    frameworks: list[str] = Field(default_factory=new_list)
    role: Role = Role.CAUSE
    severity: Severity = Severity.SIGNIFICANT
    meaning: str
    confirm: str = Field(description="How to confirm that this is the cause.")
    fixes: list[str] = Field(default_factory=new_list, description="Fix ids from catalog/fixes.toml.")
    examples: SignatureExamples = Field(default_factory=SignatureExamples)
    logged_as_warning: bool = Field(False, description=(
        "The framework reports this failure at WARNING level (Ray's worker-died line), so a warning prefix "
        "does not make it harmless."))
    goes_on: bool = Field(False, description=(
        "The line itself says the run skipped the bad batch or step and went on ('non-finite loss, skipping'): one "
        "progress line after it with a finite loss shows the run went past it."))
    generic: bool = Field(False, description=(
        "Says how a failure surfaced (a launcher's exit code, a signal, a subsystem's error wrapper), not what "
        "failed: when a specific signal of another class comes before it or on its line, it is read as a symptom."))
    before_progress: FailureClass | None = Field(None, description=(
        "Its class in a log that shows the run's start and no training progress: a failure at the first step is the setup's "
        "(binary_cross_entropy handed logits), the same line after steps trained is the numbers' (a NaN reached it)."))
    narrows: list[str] = Field(default_factory=new_list, description=(
        "Broader signatures whose text this one reads more exactly (binary_cross_entropy's range assertion is a "
        "kernel assertion): on a line both match, only this one gives a signal."))
    gate: str | None = Field(None, description=(
        "A cheaper regex that every line the pattern matches also matches (a test checks it on the examples and "
        "the corpus). For patterns keyed on text found on every training line (loss, grad_norm) that match rare "
        "values: the full pattern runs only on the chunks of a log where the gate matched."))


class FixTemplate(Model):
    """A recovery action of the fix catalog (catalog/fixes.toml)."""

    id: str
    action: str
    kind: ActionKind
    classes: list[FailureClass]
    impact: Level
    time_to_try: str
    validation: str
    not_when: dict[str, list[str]] = Field(default_factory=new_dict, description="Run fact -> values under which the fix does not apply "
                                           "(bf16 advice for a run already in bf16 or fp32).")
    min_torch: str | None = Field(None, description="The oldest PyTorch the fix works with, checked when the run prints its version.")


# ---------------------------------------------------------------- evidence


class LineRef(Model):
    source: str = Field(description="Which log or source the line came from.")
    line_no: int = Field(description="1-based line number in that source.")
    text: str


class Excerpt(Model):
    """A block of consecutive lines, already redacted."""

    source: str
    start_line: int
    lines: list[str]
    truncated: bool = False


class SignatureHit(Model):
    signature_id: str
    failure_class: FailureClass
    role: Role
    severity: Severity
    source: str
    line_no: int
    text: str
    count: int = Field(1, description="How many lines of the source matched this signature.")
    last_line_no: int | None = None


class TracebackEvent(Model):
    """A Python exception as it ended a traceback: the type, message and frames before it."""

    source: str
    line_no: int = Field(description="Line of the final 'Type: message' line.")
    start_line: int = Field(description="Line of 'Traceback (most recent call last):'.")
    exc_type: str
    message: str
    frames: list[str] = Field(default_factory=new_list, description="'file:function' of each frame.")
    chained: bool = Field(False, description="Raised while handling, or caused by, an earlier one.")


class MetricPoint(Model):
    source: str
    line_no: int
    step: float | None = None
    epoch: float | None = None
    split: str = "train"
    values: dict[str, float]
    time: LogTime | None = None
    rank: int | None = Field(None, description="The process (rank) whose line this is, when ranks share one log.")
    batch: float | None = Field(None, description="The iteration within its epoch, as the run counts it ('[208/2000]').")
    batches: float | None = Field(None, description="Iterations per epoch, when the run prints them.")


class AnomalyKind(StrEnum):
    NAN_ONSET = "nan-onset"
    GRAD_SPIKE = "grad-norm-spike"
    LOSS_BLOWUP = "loss-blowup"
    ACCURACY_COLLAPSE = "accuracy-collapse"  # training accuracy from its level to near nothing, and staying there
    LOSS_FROZEN = "loss-frozen"  # the same loss to every printed digit, log after log: outputs saturated, no gradient
    LR_ZERO = "learning-rate-zero"  # the learning rate printed as exactly 0 log after log, past the first: nothing trains
    THROUGHPUT_COLLAPSE = "throughput-collapse"
    TRAIN_VAL_DIVERGENCE = "train-val-divergence"
    EARLY_PERFECT_VALIDATION = "early-perfect-validation"
    EVAL_ON_TRAIN_DATA = "eval-on-train-data"  # the configuration names the training data as the evaluation data
    VALIDATION_METRIC_NEAR_ZERO = "validation-metric-near-zero"
    VALIDATION_METRIC_FROZEN = "validation-metric-frozen"
    NO_PROGRESS = "no-progress"
    LAUNCH_TIME_LIMIT = "launch-time-limit"  # the launch script's own `timeout N` ended the run at N seconds of wall time
    SOURCE_SIGNAL = "source-signal"  # a collector's own finding (process state, pipeline task state)


class NanOnset(StrEnum):
    """Where a run's first NaN came and what came before it: this, not the finding's words, picks the first fix."""

    VALIDATION_ONLY = "validation-only"  # only the evaluation computes nan; training stays finite
    EARLY = "early"  # within the run's first 100 steps: the learning rate, precision or unscaled inputs
    LEARNING_RATE_JUMP = "learning-rate-jump"  # the lr jumped just before it
    GRADIENT_EXPLOSION = "gradient-explosion"  # the gradient norm jumped or rose before it
    NO_WARNING = "no-warning"  # late, after stable steps and no warning: one batch or an unsafe op
    NOT_PLACED = "not-placed"  # no counter, or the excerpt's first loss: how far in cannot be told
    LOGGED_AS_ZERO = "logged-as-zero"  # a logger that drops nan from its average printed exactly 0
    EVERY_STEP_SKIPPED = "every-step-skipped"  # fp16's loss scale skipped every step: the weights never changed


class Anomaly(Model):
    kind: AnomalyKind
    failure_class: FailureClass
    severity: Severity
    source: str
    line_no: int | None = None
    step: float | None = None
    detail: str
    onset: NanOnset | None = Field(None, description="For a nan-onset: where the first NaN came and what preceded it.")


class ProgressPoint(Model):
    source: str
    line_no: int
    step: float | None = None
    epoch: float | None = None
    time: LogTime | None = None
    text: str


class SeriesSummary(Model):
    """One metric over the run, downsampled for the report; extremes kept exactly."""

    name: str
    split: str
    count: int
    first: float | None
    last: float | None
    min: float | None
    max: float | None
    trend: str = Field(description="falling, rising, flat, noisy or too-short.")
    points: list[tuple[float, float | None]] = Field(
        default_factory=new_list, description="(step or index, value), at most 200, extremes kept; null is NaN/Inf."
    )


class Trajectory(Model):
    series: list[SeriesSummary] = Field(default_factory=new_list)
    anomalies: list[Anomaly] = Field(default_factory=new_list)
    last_step: float | None = None
    first_nan_step: float | None = None
    first_nan_line: int | None = None
    last_progress: ProgressPoint | None = None
    metric_lines: int = 0


class LogLine(Model):
    """One line of a log, already redacted, with where it is."""

    source: str
    line_no: int
    text: str


class RunFact(Model):
    """One thing the run says about itself (its configuration, versions, sizes, saves), with its line."""

    name: str = Field(description="precision, learning_rate, warmup, grad_clipping, batch_size, grad_accumulation, world_size, "
                                  "torch_version, dataset_size, checkpoint_saved, launch_command")
    value: str
    source: str | None = None
    line_no: int | None = None
    text: str = Field("", description="The line it was read from, redacted and cut to 200 characters.")


class LogEvidence(Model):
    """What one pass over one log found."""

    source: str
    status: EvidenceStatus = EvidenceStatus.OK
    size_bytes: int = 0
    total_lines: int = 0
    mtime: datetime | None = None
    hits: list[SignatureHit] = Field(default_factory=new_list)
    tracebacks: list[TracebackEvent] = Field(default_factory=new_list)
    trajectory: Trajectory = Field(default_factory=Trajectory)
    tail: Excerpt | None = None
    frameworks: dict[str, int] = Field(default_factory=new_dict, description="Framework -> marker lines.")
    head: Excerpt | None = Field(None, description="The first lines (where runs print their configuration), redacted.")
    saved_lines: list[LogLine] = Field(default_factory=new_list, description="The last lines that say a checkpoint was saved.")
    siblings: int = Field(0, description="Other entries in the log's folder (up to 50; 0 outside the allowed roots).")
    redactions: int = 0
    problems: list[str] = Field(default_factory=new_list, description="What could not be read, and why.")
    changed: bool = Field(False, description="The file grew, was truncated or rotated while it was read.")
    # What the engine reads back after the pass, carried with the evidence (never in module state shared by calls);
    # excluded from every dump: it is the engine's working data, not part of any report.
    offsets: dict[int, int] = Field(default_factory=new_dict, exclude=True,
                                    description="Byte offset of each recorded line (hits, tracebacks, metric points) in the file.")
    inode: int | None = Field(None, exclude=True, description="The file's inode when it was scanned: offsets hold for that file only.")
    held: bytes | None = Field(None, exclude=True, description="The text scanned, when it was held in memory (a pasted traceback, a tracker's log).")


class CheckpointInfo(Model):
    path: str
    format: str = Field(description="safetensors, torch-zip, numpy-npz, keras-zip, zip, torch-legacy, hdf5, deepspeed, sharded-index, dir, unknown")
    size_bytes: int
    mtime: datetime
    step: int | None = None
    valid: bool
    reason: str = ""


class ArtifactInventory(Model):
    root: str
    configs: list[str] = Field(default_factory=new_list)
    logs: list[str] = Field(default_factory=new_list)
    checkpoints: list[CheckpointInfo] = Field(default_factory=new_list)
    failure_artifacts: list[str] = Field(default_factory=new_list)
    latest_pointer: str | None = None
    newest_valid_checkpoint: str | None = None
    total_files: int = 0
    truncated: bool = False
    launch_command: str | None = Field(None, description="Original command, if a config or log recorded it.")
    launch_file: str | None = Field(None, description="The command file the launch command was read from, relative to the root.")
    notes: list[str] = Field(default_factory=new_list, description="Files not read, and why (a FIFO, a device, a link out of the roots).")


class SourceEvidence(Model):
    """Evidence from a non-file source (process, tracker, pipeline, remote host).

    Collectors fill the generic parts so the engine treats every source alike: `lines` are
    scanned with the same catalog as logs, `metrics` go to the same trajectory detectors, and
    `facts` are printed in the report.
    """

    kind: str = Field(description="process, wandb, mlflow, vertex-pipeline, cloud-logging, ssh, ...")
    name: str
    status: EvidenceStatus
    state: str | None = Field(None, description="Source's own state word: RUNNING, FAILED, zombie, ...")
    facts: dict[str, str] = Field(default_factory=new_dict)
    report_lines: list[str] = Field(default_factory=new_list, description="Lines the report prints as they are.")
    lines: list[str] = Field(default_factory=new_list, description="Error or log text to scan.")
    metrics: list[MetricPoint] = Field(default_factory=new_list)
    missing: list[str] = Field(default_factory=new_list, description="What could not be collected and why.")
    signals: list[Anomaly] = Field(default_factory=new_list, description="Findings that point at a class directly.")
    details: dict[str, Any] = Field(default_factory=new_dict)


class RawLog(Model):
    """A log a collector found, not yet read: a local file the engine streams, or text the collector fetched.

    Collectors return these and never scan; the engine reads each the same way (engine/pipeline.read_raw).
    """

    source: str = Field(description="Where it came from: a path, user@host:/path, wandb:RUN/output.log, ...")
    path: str | None = Field(None, description="A local file to stream; None when `text` holds what was fetched.")
    text: str | None = Field(None, description="The fetched text (a remote tail, a tracker's log artifact).")
    size_bytes: int | None = Field(None, description="The whole file's size, when only a tail of it was fetched.")
    notes: list[str] = Field(default_factory=new_list, description="What the collector cut or could not read of it.")


class RawEvidence(Model):
    """What a collector returns (the declared interface, `Collector`): its source's own evidence and the logs it found."""

    source: SourceEvidence
    logs: list[RawLog] = Field(default_factory=new_list)


class CollectRequest(Protocol):
    """What a collector may read of a request (engine/pipeline.DiagnoseRequest is one): the target, and the
    budget of the collection (lines of tail kept, how long to poll)."""

    target: str | None
    pid: int | None
    proc: str | None
    wandb: str | None
    mlflow: str | None
    tensorboard: str | None
    vertex_pipeline: str | None
    project: str | None
    region: str | None
    last: int
    interval: int
    once: bool


class Collector(Protocol):
    """collect(request, progress) -> RawEvidence: every collector a target kind names; a polling one tells
    `progress` how long it waits."""

    def __call__(self, req: CollectRequest, /, progress: Progress | None = None) -> RawEvidence: ...


class Evidence(Model):
    target: str
    target_kind: TargetKind
    logs: list[LogEvidence] = Field(default_factory=new_list)
    artifacts: ArtifactInventory | None = None
    sources: list[SourceEvidence] = Field(default_factory=new_list)
    notes: list[str] = Field(default_factory=new_list)
    collected_at: datetime


# ---------------------------------------------------------------- analysis and report


class RuledOut(Model):
    failure_class: FailureClass
    reason: str


class Classification(Model):
    primary: FailureClass | None
    confidence: float = Field(ge=0.0, le=1.0)
    contributing: list[FailureClass] = Field(default_factory=new_list)
    ruled_out: list[RuledOut] = Field(default_factory=new_list)
    scores: dict[str, float] = Field(default_factory=new_dict)
    decisive: LineRef | None = None
    reasons: list[str] = Field(default_factory=new_list, description="Why the primary class won.")
    evidence_kind: str | None = Field(None, description="What the verdict rests on (engine/classify/confidence.py): its confidence is "
                                                         "the measured accuracy of verdicts of this kind.")


class RootCause(Model):
    proximate: str = Field(description="Where execution failed, with the log line.")
    proximate_line: LineRef | None = None
    root: str
    contributing: list[str] = Field(default_factory=new_list)


class Fix(Model):
    rank: int
    fix_id: str
    action: str
    kind: ActionKind
    risk: Risk
    risk_rule: str
    expected_impact: Level
    time_to_try: str
    validation: str
    command: str | None = None
    because: str = Field("", description="The evidence line or run fact that made this fix apply.")


class Finding(Model):
    severity: FindingSeverity
    title: str
    detail: str


class EvidenceItem(Model):
    kind: str = Field(description="signature, traceback, anomaly, progress, artifact, source, note")
    text: str
    source: str | None = None
    line_no: int | None = None


class Outcome(StrEnum):
    """How an attempt (or a grid's run) ended, as the repeat rule and the grid's rows read it."""

    FAILED = "failed"
    COMPLETED = "completed"
    RUNNING = "running"
    UNDECIDED = "undecided"
    UNREADABLE = "unreadable"


class AttemptBrief(Model):
    """One attempt of a relaunched run: enough to read it against the one before."""

    attempt: int = Field(description="0 for the first launch, then the number in attempt-N / retryN.")
    outcome: Outcome = Field(description="failed, completed, running, undecided (the engine could not decide) or unreadable.")
    fingerprint: str | None = Field(description="12 hex digits of the hash of class | rule | normalised decisive line (failed attempts).")
    last_step: float | None = Field(description="The furthest step the attempt reached.")
    path: str = Field(description="The attempt's directory or log.")


class Repeat(StrEnum):
    SAME_NO_PROGRESS = "same-failure-no-progress"
    SAME_PROGRESSED = "same-failure-progressed"
    DIFFERENT = "different-failure"
    RECOVERED = "recovered"


class RepeatVerdict(Model):
    """The last attempt read against the last failed one before it (engine/plan/repeat.py)."""

    kind: Repeat = Field(description="same-failure-no-progress (NO-GO), same-failure-progressed (GO), different-failure or recovered.")
    previous_attempt: int = Field(description="The last failed attempt before the newest one.")
    previous_step: float | None = Field(description="The furthest step that attempt reached.")
    last_step: float | None = Field(description="The furthest step the newest attempt reached.")
    reason: str = Field(description="The verdict in words; with no progress it starts 'relaunching will fail the same way'.")


class ToolInfo(Model):
    name: str = "ml-skills"
    version: str


class Diagnosis(Model):
    """The whole result: printed as the report and written as check-failed-run.json."""

    schema_version: str = Field("1", description="Version of this file's layout.")
    tool: ToolInfo = Field(description="The tool and version that wrote the file.")
    created_at: datetime = Field(description="When the diagnosis was made (UTC).")
    target: str = Field(description="What was diagnosed: a path, user@host:/path, pid, run id or pipeline job.")
    target_kind: TargetKind = Field(description="What kind of target it was (the registry of target kinds, targets.py).")
    framework: Framework = Field(description="Training framework, given with --framework or detected from the log.")
    framework_source: str = Field(description="given, detected or unknown")
    framework_detail: str | None = Field(None, description="A finer name when the log shows one: the library under "
                                         "`other` (caffe, paddle, mxnet, mindspore, sagemaker, azureml...) or a project "
                                         "on a listed framework (keras, ultralytics, detectron2, fairseq, mmdet).")
    task: Task | None = Field(None, description="The task given with --task, if any.")
    run_status: RunStatus = Field(description="What state the run is in.")
    primary_cause: FailureClass | None = Field(description="The one primary failure class, or null when the evidence cannot decide.")
    primary_cause_confidence: float = Field(ge=0.0, le=1.0, description="Confidence in the primary class, 0.00-1.00: the "
                                            "measured share of right verdicts of its kind (docs/accuracy.md, Calibration).")
    confidence_basis: str | None = Field(None, description="The kind of evidence the verdict rests on (exception-named, "
                                         "exception-located, signature, symptom, anomaly, stop).")
    confidence: Level = Field(description="The same as a word: high >= 0.75, medium >= 0.50, low below.")
    contributing_factors: list[FailureClass] = Field(default_factory=new_list, description="Other classes that made the failure likely or worse.")
    ruled_out: list[RuledOut] = Field(default_factory=new_list, description="Every other plausible class, with the evidence that ruled it out.")
    evidence: list[EvidenceItem] = Field(default_factory=new_list, description="The lines, metrics and facts the diagnosis rests on.")
    decisive_excerpt: Excerpt | None = Field(None, description="About 40 lines around the decisive line, redacted.")
    root_cause: RootCause = Field(description="Proximate cause (where execution failed), root cause and contributing causes.")
    fixes: list[Fix] = Field(default_factory=new_list, description="Ranked recovery actions, each with risk, impact, time to try and validation.")
    findings: list[Finding] = Field(default_factory=new_list, description="One finding per top fix (blocker for the critical one, high for significant ones).")
    decision: Decision = Field(description="GO when a safe recovery path exists, NO-GO when a person must decide.")
    decision_reason: str = Field(description="Why the decision is what it is.")
    next_commands: list[str] = Field(default_factory=new_list, description="Exact commands to run next, where they can be derived.")
    facts: list[RunFact] = Field(default_factory=new_list, description="What the run says about itself: precision, lr, clipping, batch sizes, "
                                 "world size, versions, dataset sizes, checkpoints saved, the launch command; each with its line.")
    insufficient_evidence: str | None = Field(
        None, description="When the evidence cannot decide: the smallest artifact that would."
    )
    last_progress: ProgressPoint | None = Field(None, description="The last training progress seen (step, epoch, time, line).")
    trajectory: list[SeriesSummary] = Field(default_factory=new_list, description="Metric series (loss, val_loss, grad_norm, lr, throughput, ...), downsampled.")
    anomalies: list[Anomaly] = Field(default_factory=new_list, description="What the metric detectors found (NaN onset, spikes, memorisation, ...).")
    artifacts: ArtifactInventory | None = Field(None, description="The run directory's configs, logs, checkpoints (with validity) and failure files.")
    report_lines: list[str] = Field(default_factory=new_list, description="Source-specific report lines.")
    sources: list[str] = Field(default_factory=new_list, description="What was read, with its status.")
    redactions: int = Field(0, description="How many secrets were redacted from this report.")
    plot: str | None = Field(None, description="Path of the metric plot PNG, when --plot was given.")
    attempts: list[AttemptBrief] = Field(default_factory=new_list, description=(
        "A run directory of several attempts (attempt-N/, train.retryN.log): each attempt diagnosed alone, oldest first; "
        "the report is the newest one's."))
    repeat: RepeatVerdict | None = Field(None, description=(
        "The newest attempt read against the last failed one before it: the same failure with no progress past it is "
        "NO-GO ('relaunching will fail the same way'), the same failure after getting further is GO."))
