"""case07: a run that was killed at step ~1600 (SIGKILL from outside, as a preemption) and auto-restarted
by run.sh with --resume auto; train.py picks sorted(glob('ckpt/step_*'))[-1], a lexicographic sort
of unpadded step numbers, so it resumes from step_750 instead of step_1500 and redoes 850 steps."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

from common import GEN, PY, fresh, install_script, log, wait_for_text


def python_child(pid: int) -> int | None:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()  # noqa: PLW1510 - the generator as it ran
    return int(out[0]) if out else None


def main() -> None:
    case = fresh("case07")
    install_script("case07_train.py", case)
    shutil.copy(GEN / "case07_run.sh", case / "run.sh")
    os.chmod(case / "run.sh", 0o755)
    env = dict(os.environ, PATH=os.path.dirname(PY) + os.pathsep + os.environ["PATH"])
    nohup = open(case / "nohup.out", "w")  # the launcher's own output, as `nohup ./run.sh &` keeps it  # noqa: SIM115 - the generator as it ran
    p = subprocess.Popen(["bash", str(case / "run.sh")], cwd=case, env=env, stdout=nohup, stderr=subprocess.STDOUT)
    nohup.close()
    logf = case / "train.log"
    if not wait_for_text(logf, "step 1600/3000", timeout=600, proc=p):
        log("never reached step 1600")
        sys.exit(1)
    child = python_child(p.pid)
    os.kill(child, signal.SIGKILL)
    log(f"killed train.py pid {child}")
    p.wait()
    log(f"run.sh exit {p.returncode}")
    text = logf.read_text()
    if p.returncode != 0 or "resumed from ckpt/step_750 " not in text or "training complete" not in text:
        log("unexpected outcome")
        sys.exit(1)


if __name__ == "__main__":
    main()
