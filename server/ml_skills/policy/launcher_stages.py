"""What a launcher reads from the run folder besides the recorded line: a package of its own name planted there, and the
folder torchrun writes its workers' logs to.

These checks grew over the forty-second to sixty-first red-team rounds; policy/restart_command.py asks them after the line's
own checks (the options themselves are judged in policy/launcher_options.py). Accelerate, whose config file chose what it
loaded, is not restarted since the sixtieth round, nor a module run by name (`-m`) since the sixty-first.
"""

from __future__ import annotations

import os
import stat

from ml_skills.policy.launcher_options import read_torchrun
from ml_skills.policy.quoting import quoted


def refusal(words: list[str], dfd: int) -> str | None:
    """Why the Python launcher `words` (its name first) run in the folder `dfd` would load code the line does not show, or
    write where it does not show, or None."""
    if shadow := _shadows_a_launcher(dfd):
        return (f"the run folder holds {quoted(shadow)}, which would be imported in place of the package of that name (torchrun's "
                "workers and the script start in the run folder, first on their import path)")
    if os.path.basename(words[0]) == "torchrun" and (log_dir := read_torchrun(words[1:]).log_dir) and (link := _a_link_on(dfd, log_dir)):
        return (f"its --log-dir passes through {quoted(link)}, a link in the run folder: torchrun would write the workers' logs "
                "wherever it points (sixty-first round)")
    return None


# top-level packages a launcher or its workers import in the run folder, where the folder comes first on the import path
_LAUNCHER_PACKAGES = frozenset({"deepspeed", "torch", "accelerate"})


def _shadows_a_launcher(dfd: int) -> str | None:
    """A file or folder of the run folder named like a launcher's package (`deepspeed/`, `torch.py`, `accelerate.pyc`)."""
    try:
        return next((n for n in sorted(os.listdir(dfd)) if n.split(".", 1)[0] in _LAUNCHER_PACKAGES), None)
    except OSError:
        return None


def _a_link_on(dfd: int, path: str) -> str | None:
    """The first part of the relative `path`, below the folder `dfd`, that is a symbolic link (or cannot be looked at),
    or None: the parts that do not exist yet are made by torchrun, as folders."""
    parts = [p for p in path.split("/") if p]
    for n in range(1, len(parts) + 1):
        sub = "/".join(parts[:n])
        try:
            mode = os.stat(sub, dir_fd=dfd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        except OSError:
            return sub
        if stat.S_ISLNK(mode):
            return sub
    return None
