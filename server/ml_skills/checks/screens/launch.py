"""The launch command: detached, with a timeout shorter than the platform's cap.
"""

from __future__ import annotations

import re

from ml_skills.checks.report import Check, Verdict

DETACH = re.compile(r"\b(nohup|setsid|tmux|screen|sbatch|systemd-run|disown|kubectl|gcloud ai custom-jobs|docker run -d)\b")


def launch_check(launch: str | None, cap_hours: float | None) -> Check:
    if not launch:
        return Check(name="detached launch", verdict=Verdict.SKIP, detail="no --launch command given")
    problems = []
    if not DETACH.search(launch):
        problems.append("not detached (nohup/setsid/tmux/sbatch/...): a closed terminal kills the run")
    m = re.search(r"\btimeout\s+(?:-\S+\s+)*(\d+(?:\.\d+)?)([smhd]?)\b|--time[= ](\d+):(\d+):(\d+)", launch)
    hours = None
    if m and m.group(1):
        hours = float(m.group(1)) * {"": 1 / 3600, "s": 1 / 3600, "m": 1 / 60, "h": 1, "d": 24}[m.group(2)]
    elif m and m.group(3):
        hours = int(m.group(3)) + int(m.group(4)) / 60
    if cap_hours:
        if hours is None:
            problems.append(f"no timeout: the platform's {cap_hours:g} h cap will kill it without warning")
        elif hours >= cap_hours:
            problems.append(f"timeout {hours:g} h is not shorter than the platform cap {cap_hours:g} h")
    if problems:
        return Check(name="detached launch", verdict=Verdict.FAIL, detail="; ".join(problems),
                     fix="launch detached, with a timeout shorter than the cap, and save on the timeout's SIGTERM")
    return Check(name="detached launch", verdict=Verdict.PASS, detail="detached" + (f", timeout {hours:g} h" if hours else ""))
