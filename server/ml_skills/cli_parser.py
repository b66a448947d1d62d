"""`ml-skills`'s command line: one parser per sub-command, built without importing pydantic (cli.py runs them).

Why its own module: the parsers are most of the CLI's text and none of its logic; tests and the fuzzer build them alone.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ml_skills import __version__, targets

# models.Framework's values but 'unknown', written out so that parsing the command line does not import pydantic
# (tests/test_cli.py keeps the two the same)
FRAMEWORKS = ["pytorch", "lightning", "deepspeed", "fsdp", "hf-trainer", "tensorflow", "jax", "megatron", "ray", "kubeflow",
              "vertex", "other"]


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return v


class _Parser(argparse.ArgumentParser):
    """argparse quotes a bad argument back on stderr: that line is stripped and redacted like every other."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        from ml_skills.safety.redact import redact  # imported on use: it imports pydantic

        self.exit(2, f"{self.prog}: error: {redact(message)}\n")


def _add_targets(p: argparse.ArgumentParser, inputs: list[targets.Input]) -> argparse._ArgumentGroup:
    """The positional target and one flag per other target input, from the registry (targets.py)."""
    group = p.add_argument_group("other targets")
    for i in inputs:
        if i.flag is None:
            p.add_argument("target", nargs="?", help=i.help)
            continue
        extra: dict = {"nargs": "?", "const": "-"} if i.paste else {}
        group.add_argument(i.flag, type=_positive if i.integer else str, metavar=i.metavar, help=i.help, **extra)
    return group


def given_targets(args: argparse.Namespace, inputs: list[targets.Input]) -> dict[targets.Input, object]:
    return {i: v for i in inputs if (v := getattr(args, i.dest)) is not None}


def _check_failed_run_parser(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "check-failed-run",
        help="diagnose a failed or unstable run",
        description="Diagnose a run from one target: " + targets.choices(targets.cli_inputs()) + ".",
    )
    src = _add_targets(c, targets.cli_inputs())
    src.add_argument("--project", help="GCP project (Vertex AI, Cloud Logging)")
    src.add_argument("--region", help="GCP region (Vertex AI)")
    src.add_argument("--interval", type=_positive, default=60, help="poll every N seconds until a terminal state (default 60)")
    src.add_argument("--once", action="store_true", help="one pass, no polling")
    opt = c.add_argument_group("options")
    opt.add_argument("--framework", choices=FRAMEWORKS, help="narrow checks to a framework (default: detected)")
    opt.add_argument("--task", choices=["classification", "regression", "language-modeling"], help="tune expectations for the task")
    opt.add_argument("--last", type=_positive, default=500, help="lines of the log's tail to keep (default 500)")
    opt.add_argument("--artifacts", metavar="PATH", help="artifact directory to inventory alongside the target")
    opt.add_argument("--out-dir", default=".", help="where check-failed-run.json is written (default: current directory)")
    opt.add_argument("--format", choices=["text", "json"], default=None, help="what to print on stdout (default text; json with --fields)")
    opt.add_argument("--fields", metavar="A,B.C", help=(
        "print only these fields of the JSON report, as one JSON object keyed by field: dotted paths like "
        "primary_cause,root_cause.root,fixes.0.action or fixes.risk (every fix's risk); implies --format json"))
    opt.add_argument("--pretty", action="store_true", help="indent the JSON (default: compact, one line)")
    opt.add_argument("--plot", action="store_true", help="also write a PNG of the metric trajectory into --out-dir")
    opt.add_argument("--fail-on-nogo", action="store_true", help="exit 1 when the decision is NO-GO (for CI gates)")
    opt.add_argument("--policy", metavar="FILE", help="action policy TOML that rates each fix's risk, as ml-skills-mcp --policy "
                                                      "(default: the shipped default policy)")
    opt.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")


def _verify_artifacts_parser(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser(
        "verify-artifacts",
        help="check a run's artifacts and provenance before promotion (fails closed)",
        description="Weights, preprocessing, held-out metrics, frozen environment, manifest, run-scoped prefix, rollback.",
    )
    v.add_argument("run_dir", help="the run's artifact directory")
    v.add_argument("--previous", metavar="PATH", help="the version this one replaces (default: manifest previous_version)")
    v.add_argument("--first-version", action="store_true", help="no previous version exists yet: skip the rollback check")
    v.add_argument("--out-dir", default=".", help="where verify-artifacts.json is written (default: current directory)")
    v.add_argument("--format", choices=["text", "json"], default="text")
    v.add_argument("--pretty", action="store_true", help="indent the JSON (default: compact, one line)")
    v.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)


def _watch_run_parser(sub: argparse._SubParsersAction) -> None:
    w = sub.add_parser(
        "watch-run",
        help="poll a live run and alert on stalls, NaN, climbing validation loss or dying throughput",
        description="Diagnose the target again every --interval seconds until it finishes, fails, stalls or passes --until-step.",
    )
    wsrc = _add_targets(w, targets.cli_inputs(watch=True))
    wsrc.add_argument("--project", help="GCP project (Vertex AI)")
    wsrc.add_argument("--region", help="GCP region (Vertex AI)")
    w.add_argument("--interval", type=float, default=60.0, help="seconds between polls (default 60)")
    w.add_argument("--max-polls", type=_positive, help="stop after N polls")
    w.add_argument("--until-step", type=float, help="validation criterion: succeed once the run passes this step with no alert")
    w.add_argument("--stall-after", type=float, help="seconds without new progress that count as a stall (default max(5 x interval, 300))")
    w.add_argument("--format", choices=["text", "json"], default="text")
    w.add_argument("--pretty", action="store_true", help="indent the JSON (default: compact, one line)")
    w.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)


def _preflight_run_parser(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser(
        "preflight-run",
        help="cheap screens before a paid run: compile, smoke run, throughput budget, data completeness, memory, checkpointing",
        description="Run the screens that catch plumbing failures before a run costs GPU-days. Fails closed.",
    )
    f.add_argument("script", help="the training script")
    f.add_argument("--args", default="", help="the real run's arguments (quoted), for the archive check")
    f.add_argument("--smoke-args", help="arguments for one tiny end-to-end pass on the CPU (quoted)")
    f.add_argument("--probe-args", help="arguments for a throughput probe of at least 1,000 samples (quoted)")
    f.add_argument("--samples-per-step", type=_positive, help="samples per logged step (batch size x accumulation x ranks)")
    f.add_argument("--total-samples", type=_positive, help="samples in one epoch of the real run")
    f.add_argument("--epochs", type=float, default=1.0)
    f.add_argument("--cost-per-hour", type=float, help="price of the real run's machine per hour")
    f.add_argument("--platform-cap-hours", type=float, help="the platform's maximum job duration")
    f.add_argument("--data", metavar="DIR", help="the dataset directory the run will read")
    f.add_argument("--expect-shards", type=_positive, help="how many shards the dataset must hold")
    f.add_argument("--marker", help="completion marker file the producer writes last (e.g. _SUCCESS)")
    f.add_argument("--shard-pattern", default="*", help="glob of shard files (default *)")
    f.add_argument("--quiet-seconds", type=float, default=60.0, help="no file may have changed this recently (default 60)")
    f.add_argument("--memory-limit", help="the job's memory limit, e.g. 16G (default: available RAM here)")
    f.add_argument("--decode-bytes", type=int, default=1, help="bytes per decoded value: 1 for uint8, 4 for float32")
    f.add_argument("--launch", help="the launch command, checked for detaching and a timeout under the cap")
    f.add_argument("--results-archive", metavar="DIR", help="where earlier runs' outputs are kept (command.txt per run)")
    f.add_argument("--timeout", type=float, default=600.0, help="deadline for each smoke or probe run in seconds")
    f.add_argument("--out-dir", default=".", help="where preflight-run.json is written")
    f.add_argument("--format", choices=["text", "json"], default="text")
    f.add_argument("--pretty", action="store_true", help="indent the JSON (default: compact, one line)")
    f.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)


def _triage_runs_parser(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser(
        "triage-runs",
        help="diagnose a whole grid of runs and group the failures by fingerprint",
        description=("Diagnose every run under the targets with the same engine as check-failed-run, in parallel, and group "
                     "the failures by fingerprint (class, rule, decisive line with numbers, paths and times normalised). "
                     "Relaunched runs whose last attempt failed the same way with no progress are NO-GO."),
    )
    t.add_argument("targets", nargs="*", metavar="TARGET", help="a directory of run directories, a run directory of attempts, or a glob of logs (quoted)")
    t.add_argument("--mlflow-experiment", action="append", default=[], metavar="ID",
                   help="also the FAILED and KILLED runs of this MLflow experiment (id or name; MLFLOW_TRACKING_URI); repeatable")
    t.add_argument("--wandb", action="append", default=[], metavar="ENTITY/PROJECT",
                   help="also the runs of this W&B project in --wandb-states (WANDB_API_KEY, WANDB_BASE_URL); repeatable")
    t.add_argument("--wandb-states", metavar="STATES",
                   help="with --wandb: the run states to list, comma-separated (default failed,crashed,killed; also preempted, "
                        "finished, running; or all)")
    t.add_argument("--since", metavar="WHEN", help="only runs whose logs were written since: 6h, 2d, 30m, or a date (2026-11-30T14:00)")
    t.add_argument("--workers", type=_positive, help="worker processes (default: the number of cores); 1 runs in this process")
    t.add_argument("--expect", metavar="GRID", help="the cells that should exist: a CSV or YAML of cell names, or a glob of result files (quoted)")
    t.add_argument("--results", metavar="GLOB", help="with a CSV/YAML --expect: where each cell's result file is, e.g. 'results/*.json'")
    t.add_argument("--ray", metavar="ADDRESS", help="run the diagnoses as Ray tasks on the cluster at ADDRESS (host:port, or auto); needs ray")
    t.add_argument("--max-runs", type=_positive, help="stop after this many runs")
    t.add_argument("--out-dir", default=".", help="where triage-runs.json is written (default: current directory)")
    t.add_argument("--format", choices=["text", "json", "jsonl"], default="text",
                   help="text summary, the JSON report, or jsonl: one line per run as it finishes (the report still goes to --out-dir)")
    t.add_argument("--pretty", action="store_true", help="indent the JSON (default: compact, one line)")
    t.add_argument("--plot", action="store_true", help="also write triage-runs.png: when each group's runs ended, one row per group")
    t.add_argument("--fail-on-nogo", action="store_true", help="exit 1 when any run's decision is NO-GO")
    t.add_argument("--policy", metavar="FILE", help="action policy TOML that rates each run's fixes, as check-failed-run --policy "
                                                    "(default: the shipped default policy)")
    t.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)


# one function per sub-command adds its parser; this order is the order `ml-skills --help` lists them in
SUBCOMMAND_PARSERS = {"check-failed-run": _check_failed_run_parser, "verify-artifacts": _verify_artifacts_parser,
                      "watch-run": _watch_run_parser, "preflight-run": _preflight_run_parser,
                      "triage-runs": _triage_runs_parser}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the arguments, and they start with a sub-command, only that sub-command's parser.

    The command line then parses, helps and errs as with every sub-command (a sub-command's parser is its own, and the
    top level reads no further than the command's name); the other four parsers cost 5-7 ms of an everyday run, most
    of it argparse asking gettext for each parser's strings."""
    p = _Parser(prog="ml-skills", description="Diagnose failed or unstable ML training runs.")
    p.add_argument("--version", action="version", version=f"ml-skills {__version__}")
    p.add_argument("--warm-cache", action="store_true",
                   help="compile the pattern databases into the cache now (ML_SKILLS_CACHE, else ~/.cache/ml-skills) and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    first = argv[0] if argv else None
    for name, add_parser in SUBCOMMAND_PARSERS.items():
        if first not in SUBCOMMAND_PARSERS or name == first:
            add_parser(sub)
    return p
