"""The triage-runs command: the triage, a progress line on a terminal, the JSON file and the summary."""

from __future__ import annotations

import argparse
import glob
import sys

from ml_skills.errors import InputError
from ml_skills.grid.discover import parse_since
from ml_skills.grid.groups import Groups
from ml_skills.grid.models import Group, Outcome, RunRecord
from ml_skills.grid.triage import triage
from ml_skills.grid.wandb_runs import parse_states
from ml_skills.models import Decision

FILENAME = "triage-runs.json"


def run(args: argparse.Namespace) -> int:
    from ml_skills.render import json_report, progress
    from ml_skills.render import triage as text
    from ml_skills.safety.redact import redact_value

    if not args.targets and not args.mlflow_experiment and not args.wandb:
        raise InputError("nothing to triage: give a directory of run directories, a quoted glob of logs, --mlflow-experiment ID "
                         "or --wandb ENTITY/PROJECT")
    states = parse_states(args.wandb_states)
    since = parse_since(args.since) if args.since else None
    if args.expect and not glob.has_magic(args.expect):
        from ml_skills.grid.expect import read_grid

        read_grid(args.expect)  # a missing or broken grid file is said before an hour of triage, not after
    from ml_skills.policy import rules

    policy = rules.load(args.policy)  # a bad file is refused before the triage runs
    with progress.terminal() as show:
        def on_run(run: RunRecord, g: Group, groups: Groups, total: int) -> None:
            if args.format == "jsonl":  # streamed as each run is complete, for a pipe or a dashboard
                sys.stdout.write(redact_value(run).model_dump_json() + "\n")
                sys.stdout.flush()
            if show is None:
                return
            failed = [x for x in groups.rows.values() if x.outcome is Outcome.FAILED]
            top = max(failed, key=lambda x: x.count, default=None)
            what = f"triage-runs ({sum(x.count for x in failed)} failed in {len(failed)} group(s)"
            if top is not None:
                what += f", largest {top.count} x {top.failure_class.value if top.failure_class else '?'}"
            what += ")"
            show(what, len(groups.runs), total, "runs")

        report, _ = triage(args.targets, since=since, workers=args.workers, max_runs=args.max_runs, on_run=on_run,
                           mlflow_experiments=tuple(args.mlflow_experiment), wandb_projects=tuple(args.wandb), wandb_states=states,
                           ray_address=args.ray, policy=policy)
    if args.expect:
        from ml_skills.grid.expect import check_expected

        report.expect = check_expected(args.expect, args.results, report.runs)
    report = redact_value(report)
    if args.plot:
        from ml_skills.render import triage_plot

        report.plot = str(triage_plot.write(report, args.out_dir))
    path = json_report.write_model(report, args.out_dir, FILENAME)
    if args.format == "json":
        sys.stdout.write(report.model_dump_json(indent=2 if args.pretty else None) + "\n")
    elif args.format == "jsonl":
        pass  # every run was written as it finished; the groups are in the report file
    else:
        sys.stdout.write(text.render(report, str(path)))
    nogo = any(r.decision is Decision.NO_GO and r.outcome is Outcome.FAILED for r in report.runs)
    return 1 if args.fail_on_nogo and nogo else 0
