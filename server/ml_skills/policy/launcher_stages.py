"""What a launcher loads besides the recorded line: its second stage, its config file, and the modules `-m` runs.

A launcher's own process can import from the run folder before the run's script does (DeepSpeed's per-node launcher,
`python -m` with the folder first on the import path). These checks grew over the forty-second to forty-fourth red-team
rounds; policy/restart_command.py asks them after the line's own checks (accelerate, whose config file chose what it loaded,
is not restarted since the sixtieth round).
"""

from __future__ import annotations

import os
import re
import stat
import sys

from ml_skills.policy.launcher_options import python_module, torchrun_module
from ml_skills.policy.quoting import quoted

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


def refusal(words: list[str], dfd: int) -> str | None:
    """Why the Python launcher `words` (its name first) run in the folder `dfd` would load code the line does not show, or
    None."""
    if why := _own_refusal(words, dfd):
        return why
    if shadow := _shadows_a_launcher(dfd):
        return (f"the run folder holds {quoted(shadow)}, which would be imported in place of the package of that name (torchrun's "
                "workers and the script start in the run folder, first on their import path)")
    return None


def _own_refusal(words: list[str], dfd: int) -> str | None:
    """A module run with `-m` only when it is the run folder's own (forty-third round)."""
    name = os.path.basename(words[0])
    module = None
    if name == "torchrun":
        module = torchrun_module(words[1:])
    elif _PYTHON.match(name):
        module = python_module(words[1:])
    if module is not None and not _own_module(dfd, module.split(".", 1)[0]):
        return (f"it runs the module {quoted(module)}, which is not the run folder's own, with the run folder "
                                     "first on the import path (`-m` puts the working folder there): a module planted in the "
                                     "folder runs in its place, and entry points there load with it; record the launcher by name "
                                     "(torchrun), or run it yourself")
    return None


# top-level packages a launcher or its workers import in the run folder, where the folder comes first on the import path
_LAUNCHER_PACKAGES = frozenset({"deepspeed", "torch", "accelerate"})


def _shadows_a_launcher(dfd: int) -> str | None:
    """A file or folder of the run folder named like a launcher's package (`deepspeed/`, `torch.py`, `accelerate.pyc`)."""
    try:
        return next((n for n in sorted(os.listdir(dfd)) if n.split(".", 1)[0] in _LAUNCHER_PACKAGES), None)
    except OSError:
        return None


def _own_module(dfd: int, top: str) -> bool:
    """Whether Python, run in the folder `dfd`, imports the top-level module `top` from that folder: a plain `top.py` or a
    regular package `top/__init__.py`, and no module the interpreter holds itself (built in or frozen) of that name. Before
    the fifty-second round any entry of that name counted: a plain file `pytest` (no `.py`) or a folder without
    `__init__.py` made `python -m pytest` "the folder's own", and the installed pytest ran, loading a plugin planted there."""
    import _imp

    if not top.isidentifier() or top in sys.builtin_module_names or _imp.is_frozen(top):
        return False
    return _regular(dfd, f"{top}.py") or (_directory(dfd, top) and _regular(dfd, f"{top}/__init__.py"))


def _regular(dfd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _directory(dfd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False
