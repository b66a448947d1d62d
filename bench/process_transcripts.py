"""Regenerate the `--pid` / `--proc` outputs in docs/remote-and-process.md.

    PYTHONPATH=server python bench/process_transcripts.py      (as root: one case runs as nobody)

Real child processes of tests/collectors/procs/train.py (a pure-Python SGD loop; its stdout is
the log), set up as tests/collectors/test_process.py sets them up: two copies of train.py in two
directories plus another user's (nobody) for the ambiguous name; a run that stalls after 20
steps; a healthy run under the name finetune.py; a run that diverges and is left unreaped (a
zombie); and root's stalled run inspected by a CLI forked from this script that dropped to
nobody. Every CLI runs in /tmp/ml-skills-docs/proc, so the report is written there. Pids and
ages change from one regeneration to the next; another train.py running on the machine at the
time would show up in the first output: the script waits up to 30 s for them to end, else writes nothing.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from ml_skills import cli

from bench.doc_blocks import ROOT, replace_fenced, run_cli, shown

DOC = ROOT / "docs" / "remote-and-process.md"
HEADING = "## Processes: `--pid PID` and `--proc NAME`"
TRAIN = ROOT / "tests" / "collectors" / "procs" / "train.py"
WORK = Path(tempfile.gettempdir()) / "ml-skills-docs" / "proc"
RUNS = Path("/tmp/runs")
NOBODY = 65534


class Kids:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, run: Path, mode: str, *, script: str = "train.py", python: str = sys.executable, user: int | None = None,
              wait_for: str | None = "step 3 ") -> subprocess.Popen[bytes]:
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir(parents=True)
        os.chmod(run, 0o777)
        shutil.copy(TRAIN, run / script)
        os.chmod(run / script, 0o755)
        log = run / "train.log"
        with open(log, "wb") as out:
            p = subprocess.Popen([python, "-u", script, mode], stdout=out, stderr=subprocess.STDOUT, cwd=run,
                                 preexec_fn=(lambda: os.setuid(user)) if user is not None else None)  # noqa: PLW1509 - no threads yet
        self.procs.append(p)
        end = time.monotonic() + 20
        while wait_for and wait_for not in log.read_text() and p.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        return p

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def as_nobody(args: list[str]) -> str:
    """Run the CLI in a forked child that dropped to nobody (it cannot exec root's interpreter)."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        code = 3
        try:
            os.close(r)
            os.setuid(NOBODY)
            os.chdir(WORK)
            buf = io.StringIO()
            with redirect_stdout(buf), redirect_stderr(buf):
                code = cli.main(args)
            os.write(w, buf.getvalue().encode())
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read().decode()
    os.waitpid(child, 0)
    return out


def _idle(log: Path, seconds: float) -> None:
    while time.time() - log.stat().st_mtime < seconds:
        time.sleep(0.5)


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("run as root: one output is another user's process (nobody)")
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    os.chmod(WORK, 0o777)
    kids = Kids()
    blocks = []
    try:
        kids.start(RUNS / "a", "ok")
        kids.start(RUNS / "b", "ok")
        kids.start(RUNS / "shared", "sleep", python="/usr/bin/python3", user=NOBODY, wait_for="starting")
        for _ in range(10):  # another session's train.py would be a fourth candidate: wait until only ours are left
            time.sleep(3)
            proc = run_cli(["check-failed-run", "--proc", "train.py"], cwd=WORK)
            if "3 processes match" in proc.stderr:
                break
        else:
            raise SystemExit("other sessions' train.py processes kept running for 30 s: nothing written (the doc says three match); try again")
        blocks.append(shown("ml-skills check-failed-run --proc train.py", proc))
        kids.stop()
        kids.procs.clear()

        stalled = kids.start(RUNS / "exp8", "stall", wait_for="step 20 ")
        _idle(RUNS / "exp8" / "train.log", 12)
        blocks.append(shown(f"ML_SKILLS_STALL_AFTER=10 ml-skills check-failed-run --pid {stalled.pid}",
                            run_cli(["check-failed-run", "--pid", str(stalled.pid)], {"ML_SKILLS_STALL_AFTER": "10"}, WORK)))

        kids.start(RUNS / "exp9", "ok", script="finetune.py")
        time.sleep(5)
        blocks.append(shown("ml-skills check-failed-run --proc finetune.py", run_cli(["check-failed-run", "--proc", "finetune.py"], cwd=WORK)))

        zombie = kids.start(RUNS / "exp10", "diverge", wait_for=None)
        end = time.monotonic() + 20
        while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < end:
            time.sleep(0.05)  # not reaped: this script is its parent and does not wait yet (poll() would reap it)
        blocks.append(shown(f"ml-skills check-failed-run --pid {zombie.pid}", run_cli(["check-failed-run", "--pid", str(zombie.pid)], cwd=WORK)))

        warm = ["check-failed-run", "--pid", str(stalled.pid), "--out-dir", str(WORK / "warm")]
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            cli.main(warm)  # as root first: imports every module the run needs (nobody cannot read root's interpreter)
        out = as_nobody(["check-failed-run", "--pid", str(stalled.pid)])
        blocks.append(f"$ ml-skills check-failed-run --pid {stalled.pid}   # as nobody\n{out}".rstrip("\n"))
    finally:
        kids.stop()
    text = DOC.read_text()
    for i, block in enumerate(blocks):
        text = replace_fenced(text, HEADING, block, nth=i)
    DOC.write_text(text)
    print(f"process: {len(blocks)} outputs")


if __name__ == "__main__":
    main()
