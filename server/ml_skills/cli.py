"""`ml-skills`: the whole diagnosis from a terminal, with no LLM.

Errors print one line and exit 2; an unexpected failure prints one line and exits 3 (with
--debug, the traceback). A diagnosis exits 0, or 1 on NO-GO when --fail-on-nogo is given.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TypeVar

from ml_skills import modelkit, targets
from ml_skills.cli_parser import build_parser, given_targets
from ml_skills.errors import InputError, MLSkillsError

T = TypeVar("T")

MAX_PASTE_BYTES = 64 * 1024 * 1024


def redact(text: str) -> str:
    """safety.redact's, imported on use: it imports pydantic, which a command imports under _importing() below."""
    from ml_skills.safety import redact as r

    return r.redact(text)


def redact_value(value: T) -> T:
    from ml_skills.safety import redact as r

    return r.redact_value(value)


def triage_runs(args: argparse.Namespace) -> int:
    from ml_skills.grid.cli import run

    return run(args)


def preflight_run(args: argparse.Namespace) -> int:
    import shlex

    from ml_skills.checks.preflight import PreflightOptions, preflight

    def split(x: str | None) -> list[str] | None:
        return shlex.split(x) if x is not None else None

    report = preflight(PreflightOptions(
        script=args.script, args=shlex.split(args.args), smoke_args=split(args.smoke_args), probe_args=split(args.probe_args),
        samples_per_step=args.samples_per_step, total_samples=args.total_samples, epochs=args.epochs,
        cost_per_hour=args.cost_per_hour, cap_hours=args.platform_cap_hours, data=args.data,
        expect_shards=args.expect_shards, marker=args.marker, shard_pattern=args.shard_pattern,
        quiet_seconds=args.quiet_seconds, memory_limit=args.memory_limit, decode_bytes=args.decode_bytes,
        launch=args.launch, results_archive=args.results_archive, timeout=args.timeout, out_dir=args.out_dir,
    ))
    report = redact_value(report)
    path = _write_json(report, args.out_dir, "preflight-run.json")
    sys.stdout.write(report.model_dump_json(indent=2 if args.pretty else None) + "\n" if args.format == "json"
                     else redact(report.render() + f"Report: {path}\n"))
    return 0 if report.decision.value == "GO" else 1


def watch_run(args: argparse.Namespace) -> int:
    from ml_skills.checks.watch import watch
    from ml_skills.engine.pipeline import DiagnoseRequest
    from ml_skills.render import progress

    inputs = targets.cli_inputs(watch=True)
    given = given_targets(args, inputs)
    if not given:
        raise InputError(f"nothing to watch: give {targets.choices(inputs)}")
    if len(given) > 1:
        raise InputError(f"watch one target at a time ({targets.choices(inputs)})")
    if args.interval <= 0:
        raise InputError("--interval must be more than 0 seconds")
    req = DiagnoseRequest(**{i.field: v for i, v in given.items()}, project=args.project, region=args.region, once=True)

    def emit_line(e) -> None:
        if args.format == "text":
            sys.stdout.write(redact(f"[{e.at:%H:%M:%S}] {e.kind}: {e.message}") + "\n")
            sys.stdout.flush()

    with progress.terminal() as show:
        def emit(e) -> None:  # an event line on stdout; the progress line on stderr is cleared first
            if show is not None:
                show.clear()
            emit_line(e)

        result = watch(req, interval=args.interval, max_polls=args.max_polls, until_step=args.until_step,
                       stall_after=args.stall_after, emit=emit, progress=show)
    if args.format == "json":
        sys.stdout.write(redact_value(result).model_dump_json(indent=2 if args.pretty else None) + "\n")
    return 0 if result.healthy else 1


def _write_json(model, out_dir: str, name: str) -> str:
    from ml_skills.render.json_report import write_model

    return str(write_model(model, out_dir, name))


def verify_artifacts(args: argparse.Namespace) -> int:
    from ml_skills.checks.provenance import verify

    report = verify(args.run_dir, args.previous, first_version=args.first_version)
    report = redact_value(report)
    path = _write_json(report, args.out_dir, "verify-artifacts.json")
    sys.stdout.write(report.model_dump_json(indent=2 if args.pretty else None) + "\n" if args.format == "json"
                     else redact(report.render() + f"Report: {path}\n"))
    return 0 if report.decision.value == "GO" else 1


COMMANDS = {"check-failed-run": "check_failed_run", "verify-artifacts": "verify_artifacts", "watch-run": "watch_run", "preflight-run": "preflight_run",
            "triage-runs": "triage_runs"}


def _read_paste(spec: str) -> str:
    if spec == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError("--traceback reads stdin, but nothing was piped in: paste into a file and pass it, or pipe it")
        data = sys.stdin.buffer.read(MAX_PASTE_BYTES + 1)
    else:
        from ml_skills.collectors.logfile import check_readable
        from ml_skills.safety.paths import open_binary

        path = check_readable(spec)
        with open_binary(path) as f:  # checked on the fd: a FIFO swapped in is refused, never waited on
            data = f.read(MAX_PASTE_BYTES + 1)
    if len(data) > MAX_PASTE_BYTES:
        raise InputError("the pasted text is over 64 MiB: pass the log file as the target instead")
    return data.decode("utf-8", errors="replace")


@contextlib.contextmanager
def _importing() -> Iterator[None]:
    """The collector paused while the engine, its models and the catalog are imported, then what they made frozen;
    the engine's lazy patterns compiled from the programs kept by catalog/recache.py; pydantic's plugin scan skipped
    when catalog/plugincache.py knows it finds none.

    Importing them makes tens of thousands of objects that live as long as the process (classes, pydantic's schemas
    and validators); the collector walked them over and over while they were being made (about 70 collections,
    15-30 ms of a 0.4 s run on an everyday log). Frozen, later collections skip them. Only when the CLI is the
    program: a caller running main() in its own process keeps its collector as it was.
    """
    if not _PROGRAM or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        from ml_skills import lazyre
        from ml_skills.catalog import plugincache, recache

        if not modelkit.plain():
            plugincache.skip_known_none()  # before the first model: pydantic's plugin scan, when it is known to find none
        lazyre.use_compiler(recache.compile)  # the engine's patterns from programs kept between runs
        yield
    finally:
        gc.freeze()
        gc.enable()


def _plain_models_fit(args: argparse.Namespace) -> bool:
    """check-failed-run on one local log file, with the shipped policy, no --fields, --plot or --artifacts: the everyday
    run, whose models may be plainmodel.py's plain classes (the same reports, no pydantic imported: modelkit.py) when
    no pydantic plugin is installed. A --last over targets.MAX_LAST, which the request's model refuses, is left to
    pydantic, whose message the CLI has always printed."""
    given = given_targets(args, targets.cli_inputs())
    if args.fields is not None or args.plot or args.policy is not None or args.artifacts is not None or list(given) != [targets.TARGET]:
        return False
    if args.last > targets.MAX_LAST:
        return False
    target = str(given[targets.TARGET])
    return not targets.is_remote(target) and os.path.isfile(target)


def check_failed_run(args: argparse.Namespace) -> int:
    if _PROGRAM and _plain_models_fit(args):
        from ml_skills.catalog import plugincache

        if plugincache.known_none():  # an installed pydantic plugin sees the pydantic models it always saw
            modelkit.use_plain()
    with _importing():
        from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
        from ml_skills.models import Diagnosis
        from ml_skills.policy import rules
        from ml_skills.render import fields as report_fields
        from ml_skills.render import json_report, progress, text
        from ml_skills.safety import redact as redaction

    fields = None
    if args.fields is not None:
        if args.format == "text":
            raise InputError("--fields prints JSON: drop --format text (or use --format json)")
        fields = report_fields.parse(args.fields)
        top = set(Diagnosis.model_fields)
        unknown = [f for f in fields if f.split(".", 1)[0] not in top and f.split(".", 1)[0] not in report_fields.ALIASES]
        if unknown:  # said before the diagnosis runs, so a typo costs nothing
            raise InputError(f"unknown field {unknown[0]!r}{report_fields.did_you_mean(unknown[0].split('.')[0], list(Diagnosis.model_fields))}: "
                             f"the report's top-level fields are {', '.join(Diagnosis.model_fields)}")
    elif args.format is None:
        args.format = "text"
    inputs = targets.cli_inputs()
    given = given_targets(args, inputs)
    if not given:
        raise InputError(f"nothing to diagnose: give {targets.choices(inputs)}")
    if len(given) > 1:
        raise InputError(f"give one target at a time ({targets.choices(inputs)}); use --artifacts for a directory to read alongside")
    req = DiagnoseRequest(
        **{i.field: _read_paste(str(v)) if i.paste else v for i, v in given.items()},
        project=args.project, region=args.region, framework=args.framework, task=args.task,
        last=args.last, artifacts=args.artifacts,
        interval=args.interval, once=args.once,
    )
    policy = rules.load(args.policy)  # a bad file is refused before the diagnosis runs
    with redaction.remembered():  # each text redacted once, its result replayed (the report is redacted again below)
        with progress.terminal() as show:  # a status line on stderr, in a terminal only
            d = diagnose(req, show, risk_of=policy.risk_of)
        if args.plot:
            from ml_skills.render import plot

            d.plot = str(plot.write(d, args.out_dir))
        d = redact_value(d)  # the last step before anything is written or printed (the plot path came after the pass)
        path = json_report.write(d, args.out_dir)
        if fields is not None:
            sys.stdout.write(report_fields.dumps(report_fields.select(d.model_dump(mode="json"), fields), args.pretty) + "\n")
        elif args.format == "json":
            sys.stdout.write(d.model_dump_json(indent=2 if args.pretty else None) + "\n")
        else:
            sys.stdout.write(text.render(d, str(path)))  # render strips and redacts its whole text last
    return 1 if args.fail_on_nogo and d.decision.value == "NO-GO" else 0


def _warm_cache() -> int:
    from ml_skills import dbcache, lazyre
    from ml_skills.catalog import recache
    from ml_skills.engine import attempts, pipeline  # noqa: F401 - imported for the lazy patterns they define
    from ml_skills.engine.read import scan
    from ml_skills.render import text  # noqa: F401

    scan.warm_cache()
    lazyre.use_compiler(recache.compile)  # and the engine's regular expressions, kept as re programs
    lazyre.compile_all()
    kept = recache.save(hot=False)
    where = dbcache.cache_dir()
    n = len(list(where.glob("hs-*.db"))) if where.is_dir() else 0
    if n == 0:
        print(f"ml-skills: error: could not write the pattern cache in {where}; every run compiles its patterns "
              "(about 0.5 s): set ML_SKILLS_CACHE to a writable directory", file=sys.stderr)
        return 2
    print(f"ml-skills: {n} compiled pattern databases and {kept} regular-expression programs in {where}")
    return 0


_PROGRAM = False
"""True when main() runs as the program (the console script, python -m), which exits when it returns."""


def main(argv: Sequence[str] | None = None) -> int:
    global _PROGRAM
    _PROGRAM = argv is None
    code = _main(argv)
    if argv is None:  # the program itself (the console script, python -m): the process exits next
        # Exiting collects every object left (pydantic's schemas, the catalog, the engine's tables), then frees every
        # module: 0.1-0.25 s of a 0.4 s run on an everyday log with the collector running, about 10 ms frozen. All that
        # was to be written has been (reports are written and closed before this): run the atexit handlers, flush the
        # two streams, and end the process without the teardown.
        gc.freeze()
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """What interpreter shutdown does that this program needs (atexit handlers, flushed streams), then the exit."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that went away, a closed stream: nothing left to say
            pass
    os._exit(code)


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.warm_cache and args.command is None:
        return _warm_cache()
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return globals()[COMMANDS[args.command]](args)
    except MLSkillsError as e:
        print(f"ml-skills: error: {redact(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ml-skills: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:
        if getattr(args, "debug", False):
            raise
        print(f"ml-skills: internal error: {type(e).__name__}: {redact(str(e))} (rerun with --debug for the traceback, and report it)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
