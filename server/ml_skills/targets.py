"""Every kind of target a diagnosis starts from, declared once.

A kind is one `Kind` entry in KINDS: the input that names it (a CLI flag, the request's field
and the MCP `diagnose` parameter, all of one name), how that input is confined, the collector
module that serves it, whether watch-run can poll it, its label and the evidence tool that
reads it. The CLI flags of check-failed-run and watch-run, `DiagnoseRequest`'s fields, kind
and label, the engine's collector lookup, the MCP `diagnose` parameters and their
confinement, the server's instructions and the "give one target" messages are built from
here; tests/test_targets.py checks that nothing lists the kinds by hand. Adding a source is
one entry here, one collector module and one thin tool.

Plain data, no pydantic: the CLI builds its parser from this module without importing the engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class TargetKind(StrEnum):
    LOG = "log"
    DIRECTORY = "directory"
    SSH = "ssh"
    TRACEBACK = "traceback"
    PID = "pid"
    PROC = "proc"
    WANDB = "wandb"
    MLFLOW = "mlflow"
    VERTEX_PIPELINE = "vertex-pipeline"
    TENSORBOARD = "tensorboard"


class Confine(StrEnum):
    """How an input is held to the allowed roots before anything reads it."""

    NONE = "none"  # not a path: an id, a number, pasted text
    PATH = "path"  # a local file or directory inside the roots
    PATH_OR_REMOTE = "path-or-remote"  # as PATH, or user@host:/path, read over ssh
    PATH_OR_RUN = "path-or-run"  # a local directory when one by that name exists, else a tracker's run id
    PROCESS = "process"  # a process the person names brings its own evidence: no roots (the CLI only)


REMOTE = re.compile(r"^[^/\s@]+@[^/\s]+:/")
"""user@host:/path, as scp reads it: user@host: before any slash is remote."""


def is_remote(value: str | None) -> bool:
    return bool(value and REMOTE.match(value))


@dataclass(frozen=True)
class Input:
    """What the person gives: one CLI flag, one request field, one MCP parameter."""

    field: str  # DiagnoseRequest's field and the MCP diagnose parameter
    flag: str | None  # the CLI option; None for the positional target
    noun: str  # how messages name it: "--wandb", "a log path or artifact directory"
    phrase: str  # how the diagnose tool's description names it
    help: str  # CLI help
    description: str  # the MCP parameter's description
    metavar: str | None = None
    integer: bool = False  # a whole number of 1 or more (a pid); else text
    max_length: int | None = None
    upper: int | None = None  # with integer
    confine: Confine = Confine.NONE
    paste: bool = False  # the CLI flag names a file (or '-' for stdin) whose text is the value
    mcp: bool = True  # a parameter of the diagnose tool
    watch: bool = False  # watch-run can poll it

    @property
    def dest(self) -> str:
        """The argparse attribute: the flag's name, or `target` for the positional argument."""
        return self.flag.lstrip("-").replace("-", "_") if self.flag else "target"


@dataclass(frozen=True)
class Kind:
    kind: TargetKind
    input: Input
    label: str  # "{}" is the input's value
    collector: str | None = None  # the module of ml_skills/collectors/ whose collect() serves it (a models.Collector); None: the engine reads it
    waits: bool = False  # the collector polls until a terminal state and takes a `progress` callback
    tool: str | None = None  # the MCP evidence tool that reads this source on its own (logs have several)


TARGET = Input(
    field="target", flag=None, noun="a log path or artifact directory",
    phrase="a local log or run directory, or a remote log (user@host:/path)",
    help="log file, artifact directory, or user@host:/path/to/train.log",
    description=("Log file or run directory inside the allowed roots, or user@host:/path/to/train.log (read over ssh, "
                 "host already in known_hosts)."),
    max_length=4096, confine=Confine.PATH_OR_REMOTE, watch=True,
)
TRACEBACK = Input(
    field="traceback_text", flag="--traceback", noun="--traceback", phrase="pasted traceback text", metavar="FILE",
    help="pasted traceback or log text: a file, or '-' / nothing for stdin",
    description="Pasted traceback or log text, instead of a target.", max_length=4 * 1024 * 1024, paste=True,
)
PID = Input(
    field="pid", flag="--pid", noun="--pid", phrase="a process id", integer=True, upper=4_194_304,
    help="a live (or just-ended) training process",
    description="A live (or just-ended) training process, instead of a target.", confine=Confine.PROCESS, watch=True,
)
PROC = Input(
    field="proc", flag="--proc", noun="--proc", phrase="a process name", metavar="NAME", mcp=False,
    help="find the training process by name", description="A training process found by name.", confine=Confine.PROCESS,
)
WANDB = Input(
    field="wandb", flag="--wandb", noun="--wandb", phrase="a W&B run", metavar="RUN", max_length=1000,
    help="W&B run: entity/project/run_id, or a local wandb/run-* directory",
    description=("A W&B run instead of a target: entity/project/run_id (WANDB_API_KEY from the server's environment) or a "
                 "local wandb/run-* directory inside the allowed roots."),
    confine=Confine.PATH_OR_RUN, watch=True,
)
MLFLOW = Input(
    field="mlflow", flag="--mlflow", noun="--mlflow", phrase="an MLflow run", metavar="RUN", max_length=64,
    help="MLflow run id (tracking server from MLFLOW_TRACKING_URI)",
    description="An MLflow run id instead of a target (MLFLOW_TRACKING_URI from the server's environment).", watch=True,
)
VERTEX_PIPELINE = Input(
    field="vertex_pipeline", flag="--vertex-pipeline", noun="--vertex-pipeline", phrase="a Vertex AI job", metavar="JOB",
    max_length=300, help="Vertex AI pipeline job id or resource name",
    description="A Vertex AI pipeline or custom job (id or full resource name) instead of a target; one pass, no polling.",
    watch=True,
)
TENSORBOARD = Input(
    field="tensorboard", flag="--tensorboard", noun="--tensorboard", phrase="TensorBoard event files",
    metavar="DIR_OR_FILE", max_length=4096,
    help="TensorBoard logs: a run directory of events.out.tfevents.* files, or one such file",
    description=("TensorBoard logs instead of a target: a run directory holding events.out.tfevents.* files, or one such "
                 "file, inside the allowed roots (scalars: loss, validation loss, lr, grad norm)."),
    confine=Confine.PATH, watch=True,
)

KINDS: tuple[Kind, ...] = (
    Kind(TargetKind.LOG, TARGET, "{}"),
    Kind(TargetKind.DIRECTORY, TARGET, "{}"),
    Kind(TargetKind.SSH, TARGET, "{}", "ssh", tool="read_remote_log"),
    Kind(TargetKind.TRACEBACK, TRACEBACK, "pasted traceback"),
    Kind(TargetKind.PID, PID, "pid {}", "process", tool="check_process"),
    Kind(TargetKind.PROC, PROC, "process '{}'", "process"),
    Kind(TargetKind.WANDB, WANDB, "wandb run {}", "wandb", tool="get_wandb_run"),
    Kind(TargetKind.MLFLOW, MLFLOW, "mlflow run {}", "mlflow", tool="get_mlflow_run"),
    Kind(TargetKind.VERTEX_PIPELINE, VERTEX_PIPELINE, "vertex pipeline {}", "vertex",
         waits=True, tool="describe_vertex_job"),
    Kind(TargetKind.TENSORBOARD, TENSORBOARD, "tensorboard {}", "tensorboard",
         tool="get_tensorboard_run"),
)

BY_KIND: dict[TargetKind, Kind] = {k.kind: k for k in KINDS}
INPUTS: tuple[Input, ...] = tuple(dict.fromkeys(k.input for k in KINDS))

MAX_LAST = 100_000
"""The most lines of a log's tail a request may keep (DiagnoseRequest.last): here, so that the CLI knows it without the
models (a larger --last is refused by the pydantic models, with their words: cli._plain_models_fit)."""
"""Each input once, the positional target first: the CLI's and the diagnose tool's order."""


def of_input(inp: Input) -> Kind:
    """The kind an input other than the positional target stands for (one kind each)."""
    return next(k for k in KINDS if k.input is inp)


def either(words: list[str]) -> str:
    """"a, b, c or d"."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def choices(inputs: tuple[Input, ...] | list[Input], *, mcp: bool = False) -> str:
    """The inputs as a message names them: CLI nouns, or the MCP tool's parameter names."""
    return either([i.field if mcp else i.noun for i in inputs])


def cli_inputs(*, watch: bool = False) -> list[Input]:
    return [i for i in INPUTS if i.watch or not watch]


def mcp_inputs() -> list[Input]:
    return [i for i in INPUTS if i.mcp]


def evidence_tools() -> list[str]:
    """The evidence tools that read one source each, in the registry's order (the server's instructions)."""
    return list(dict.fromkeys(k.tool for k in KINDS if k.tool))
