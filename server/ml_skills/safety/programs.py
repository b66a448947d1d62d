"""Programs the server itself starts (nvidia-smi, ssh, a restart's launcher), found only on the absolute
entries of its PATH.

A relative entry ('bin', '.', or the empty entry a trailing ':' leaves) is looked up from the working
folder, and the server's working folder is often the run folder it reads: a file there called
nvidia-smi or ssh would run when an evidence tool asks the GPU or a remote host (the thirty-ninth
round), and one called python when a restart starts (the thirty-eighth). The child gets the same PATH,
so nothing it starts by name is looked up there either.
"""

from __future__ import annotations

import os
import shutil


def absolute_path(path: str | None = None) -> str:
    """`path` (the server's PATH by default) without its relative and empty entries."""
    given = os.environ.get("PATH", "") if path is None else path
    return os.pathsep.join(p for p in given.split(os.pathsep) if os.path.isabs(p))


def find_program(name: str) -> str | None:
    """The program's file on the absolute entries of the server's PATH, or None."""
    found = shutil.which(name, path=absolute_path())
    return found if found is not None and os.path.isabs(found) else None


_OWN: dict[str, str | None] = {}  # variables the server set for its own libraries, with the value it inherited


def set_for_this_process(name: str, value: str) -> None:
    """Set an environment variable for the server's own libraries only: child_env gives a process it starts the value
    the server inherited (MLflow's telemetry switch must not reach a restarted run)."""
    _OWN.setdefault(name, os.environ.get(name))
    os.environ[name] = value


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment for a process it starts, with `extra` set, PATH kept to its absolute entries, and so is the
    PYTHONPATH the server inherited (not one `extra` sets, which the person was shown): sixty-fourth round, a server started
    with `PYTHONPATH=:/opt/x` (what `export PYTHONPATH=$PYTHONPATH:/opt/x` leaves when it was empty) passed the empty entry
    to a restart, where Python reads it as the working folder, the run folder, and its planted sitecustomize.py ran."""
    env = {**os.environ, **(extra or {}), "PATH": absolute_path()}
    for name, inherited in _OWN.items():
        if name not in (extra or {}):
            if inherited is None:
                env.pop(name, None)
            else:
                env[name] = inherited
    if "PYTHONPATH" in os.environ and "PYTHONPATH" not in (extra or {}):
        if kept := absolute_path(os.environ["PYTHONPATH"]):
            env["PYTHONPATH"] = kept
        else:
            del env["PYTHONPATH"]
    return env
