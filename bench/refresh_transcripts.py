"""Regenerate every printed-report transcript in the docs from the current CLI: one command.

    PYTHONPATH=server python bench/refresh_transcripts.py                    # all of them (~5 min, as root)
    PYTHONPATH=server python bench/refresh_transcripts.py --only examples    # a subset: see PARTS
    PYTHONPATH=server python bench/refresh_transcripts.py --check            # exit 1 if a log example is stale

PARTS, each rewriting its own file(s):

- examples: examples/*/README.md (below);
- vertex, trackers, remote, process: docs/vertex.md, docs/trackers.md, docs/remote-and-process.md,
  by bench/vertex_transcripts.py, bench/tracker_transcripts.py, bench/remote_transcripts.py and
  bench/process_transcripts.py (the fakes, servers and processes each sets up are in its docstring);
- lab-distributed: docs/lab-distributed.md, by its own generator `python -m tests.lab.lab_table`;
- report: docs/report.md, by bench/report_doc.py.

The examples are of two kinds, because the folders keep logs and configs but not checkpoints:

- a log target (nan-late-batch, oom-eager-loading): the bundled files are all the CLI reads, so
  the transcript is `ml-skills check-failed-run run/train.log` run on a copy of them in a scratch
  directory (cwd = its parent, so every path printed is relative). tests/test_docs.py re-runs it.
- a run directory with checkpoints (sigkill-exit-137, truncated-checkpoint-resume): the report
  depends on the checkpoints, so the lab scenario is run again for real (pytest with LAB_RECORD
  and a fixed --basetemp, so the paths are stable) and the printed report the lab test got is
  shown verbatim, with the command it ran; the fresh logs and configs replace the bundled ones.

Nothing is hand-edited: every transcript is the output as the CLI printed it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
LOG_EXAMPLES = {"nan-late-batch": "run/train.log", "oom-eager-loading": "run/train.log"}
LAB_EXAMPLES = {
    "sigkill-exit-137": "tests/lab/test_lab_memory_crash.py::test_external_sigkill_with_flat_memory_is_a_crash_and_resumes",
    "truncated-checkpoint-resume":
        "tests/lab/test_lab_data_config_io.py::test_resume_from_truncated_checkpoint_goes_back_to_the_newest_valid_one",
}
BASETEMP = Path(tempfile.gettempdir()) / "ml-skills-lab"
MARK = "The report below"
REGEN = "Regenerate with `PYTHONPATH=server python bench/refresh_transcripts.py --only examples`."


def bundled_transcript(name: str) -> str:
    """`$ command` then stdout of the CLI on a copy of the example's bundled files."""
    target = LOG_EXAMPLES[name]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        for f in (EXAMPLES / name).iterdir():
            if f.is_file() and f.name != "README.md":
                shutil.copy(f, run / f.name)
        proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", target], cwd=tmp,
                              capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        sys.exit(f"{name}: the CLI failed ({proc.returncode}):\n{proc.stderr}")
    return f"$ ml-skills check-failed-run {target}\n{proc.stdout}"


def shown_transcript(readme: str) -> str:
    """The transcript block of an example README: the fenced block that starts with `$ ml-skills`."""
    return "$ ml-skills" + readme.split("```\n$ ml-skills", 1)[1].split("```", 1)[0]


def lab_records(names: list[str]) -> dict[str, dict]:
    """Run the lab tests behind these examples; the diagnosis each recorded, by example name."""
    record = Path(tempfile.mkdtemp()) / "record.jsonl"
    env = {**os.environ, "LAB_RECORD": str(record)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={BASETEMP}",
                           *(LAB_EXAMPLES[n] for n in names)], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"the lab failed; nothing written:\n{proc.stdout[-4000:]}")
    recs = [json.loads(line) for line in record.read_text().splitlines()]
    out = {}
    for name in names:
        mine = [r for r in recs if r["test"] == LAB_EXAMPLES[name]]
        if not mine:
            sys.exit(f"no diagnosis recorded for {LAB_EXAMPLES[name]}")
        out[name] = mine[0]  # the first diagnosis the test made: the failed run
    return out


def lab_transcript(name: str, rec: dict) -> str:
    """Copy the lab run's logs and configs into the example; `$ command` then the recorded stdout."""
    run_dir = Path(rec["target"])
    report = next(line for line in rec["text"].splitlines() if line.startswith("Report: "))
    out_dir = Path(report.removeprefix("Report: ")).parent  # the --out-dir the lab test passed
    dest = EXAMPLES / name
    for f in dest.iterdir():
        if f.name != "README.md":
            f.unlink()
    for f in sorted(run_dir.iterdir()):
        if f.is_file() and f.suffix in (".log", ".json", ".txt"):
            shutil.copy(f, dest / f.name)
    return f"$ ml-skills check-failed-run {run_dir} --out-dir {out_dir}\n{rec['text']}"


def prose(name: str) -> str:
    if name in LOG_EXAMPLES:
        return (f"{MARK} is what the current CLI prints for this folder's files, copied into `run/` "
                "(run from the directory holding `run/`, so the paths are relative; "
                "`tests/test_docs.py::test_example_transcript_is_what_the_cli_prints_today` fails when it drifts):")
    return (f"{MARK} is what the CLI printed in that lab run, on the run directory with its checkpoints "
            f"(pytest ran with `--basetemp={BASETEMP}`, hence the paths). Without them, the CLI on this folder alone "
            "gives a different report:")


def write(name: str, transcript: str) -> bool:
    """Put the transcript into the README; True if it changed."""
    path = EXAMPLES / name / "README.md"
    old = path.read_text()
    head = old.split(MARK, 1)[0] if MARK in old else old.split("```", 1)[0]
    new = f"{head}{prose(name)}\n\n```\n{transcript.rstrip(chr(10))}\n```\n\n{REGEN}\n"
    path.write_text(new)
    return new != old


SCRIPTS = {"vertex": ["bench/vertex_transcripts.py"], "trackers": ["bench/tracker_transcripts.py"],
           "remote": ["bench/remote_transcripts.py"], "process": ["bench/process_transcripts.py"],
           "lab-distributed": ["-m", "tests.lab.lab_table"], "report": ["bench/report_doc.py"]}
PARTS = ["examples", *SCRIPTS]


def examples(skip_lab: bool) -> None:
    for name in LOG_EXAMPLES:
        print(f"{name}: {'rewritten' if write(name, bundled_transcript(name)) else 'unchanged'}")
    if not skip_lab:
        for name, rec in lab_records(list(LAB_EXAMPLES)).items():
            print(f"{name}: {'rewritten' if write(name, lab_transcript(name, rec)) else 'unchanged'} (lab re-run)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare the log examples' transcripts; write nothing")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts: {', '.join(PARTS)} (default: all)")
    ap.add_argument("--skip-lab", action="store_true", help="examples: only the log examples (no training run)")
    args = ap.parse_args()
    if args.check:
        stale = [n for n in LOG_EXAMPLES if shown_transcript((EXAMPLES / n / "README.md").read_text()).rstrip("\n")
                 != bundled_transcript(n).rstrip("\n")]
        print("stale: " + ", ".join(stale) if stale else "all log-example transcripts current")
        sys.exit(1 if stale else 0)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    if unknown := [p for p in parts if p not in PARTS]:
        sys.exit(f"unknown part(s) {', '.join(unknown)}: choose from {', '.join(PARTS)}")
    for part in parts:
        if part == "examples":
            examples(args.skip_lab)
            continue
        proc = subprocess.run([sys.executable, *SCRIPTS[part]], cwd=ROOT, check=False)
        if proc.returncode != 0:
            sys.exit(f"{part}: {' '.join(SCRIPTS[part])} failed ({proc.returncode})")


if __name__ == "__main__":
    main()
