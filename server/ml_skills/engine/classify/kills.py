"""SIGKILLs whose reason the log prints: a launcher's teardown or a time limit, not the kernel's OOM killer.

An exit of -9 or 137 alone reads as out of memory (sigkill-exit-137). When the log names who killed the process and
why, that reading only hints: torchrun's forced kill of a worker that outlived its SIGTERM, or a time limit's kill just
above the exit status it causes."""

from __future__ import annotations

import re

from ml_skills.engine.classify.signals import ROLE_W, Signal
from ml_skills.lazyre import lazy
from ml_skills.models import Role

_FORCED = lazy(r"Unable to shutdown process (\d+) via 15")


def kills_explained(signals: list[Signal]) -> None:
    """A SIGKILL whose reason the log prints: torchrun killing a worker that outlived its SIGTERM ('Unable to shutdown
    process 12850 via 15, forcefully exiting via 9': then 'exitcode: -9 (pid: 12850)' and 'Signal 9 (SIGKILL) received
    by PID 12850'), or a time limit's kill a few lines before the exit status 137 it causes ('Killed  timeout -s KILL 35
    python ...', then 'exited with status 137'). Such a -9 or 137 is that teardown or limit, not the kernel's OOM
    killer, so it only hints (a worker that ignores a SIGTERM is blocked)."""
    forced = {(s.source, m[1]) for s in signals if s.label == "launcher-forced-kill" and (m := _FORCED.search(s.text))}
    limits = [s for s in signals if s.label == "job-time-limit" and s.line_no is not None]
    for s in signals:
        if s.label != "sigkill-exit-137" or s.role is Role.HINT or s.line_no is None:
            continue
        if any(src == s.source and re.search(rf"(?<!\d){pid}(?!\d)", s.text) for src, pid in forced) or any(
                t.source == s.source and 0 <= s.line_no - (t.line_no or 0) <= KILL_NAMED_LINES for t in limits):
            s.weight *= ROLE_W[Role.HINT] / ROLE_W[s.role]
            s.role = Role.HINT


KILL_NAMED_LINES = 8  # how far below a time limit's kill the exit status it causes is printed
