"""A run that stopped printing: is its process still there, and where does it wait."""

from __future__ import annotations

import re
import shlex

from ml_skills.engine.plan.facts import fact
from ml_skills.lazyre import lazy
from ml_skills.models import RunFact

_LOG_PID = lazy(r"\b(?:pid|PID)[: =]+(\d{2,9})\b")


def process_state(facts: list[RunFact], tail: list[str], *, by_name: bool = True) -> list[str]:
    """Is the process still there, and where is it: by the pid the log printed, else by the script that was launched."""
    pid = next((m.group(1) for line in reversed(tail) for m in [_LOG_PID.search(line)] if m), None)
    if pid is not None:
        return [(f"ps -o pid,etime,stat,args -p {pid} && py-spy dump --pid {pid}   # is the process the log names (pid {pid}) still "
                "there, and where each of its threads waits (pip install py-spy; may need sudo)")]
    if not by_name:
        return []
    launch = fact(facts, "launch_command")
    script = re.search(r"(\S+\.py)\b", launch.value) if launch else None
    if script and re.fullmatch(r"[\w./-]{1,200}", script.group(1)):
        s = shlex.quote(script.group(1))
        return [(f"pgrep -a -f {s} && for p in $(pgrep -f {s}); do py-spy dump --pid $p; done   # is the run still there, and where "
                "each of its processes waits (pip install py-spy)")]
    return [("ps -eo pid,etime,stat,args | grep -E '[p]ython|[t]orchrun|[d]eepspeed|[a]ccelerate' | head   # is the run still there "
            "(a stopped log with a live process is a hang: dump its stack with py-spy); none: it was killed, see the job's stderr")]
