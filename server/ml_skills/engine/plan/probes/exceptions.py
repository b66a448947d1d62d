"""The module that would not import, the package whose API refused a call, the line of the run's own code that raised."""

from __future__ import annotations

import shlex

from ml_skills.lazyre import lazy
from ml_skills.models import TracebackEvent

_NO_MODULE = lazy(r"No module named '?([A-Za-z_][\w.]{0,80})'?")
_CANNOT_IMPORT = lazy(r"cannot import name '(\w{1,80})' from '([\w.]{1,80})'(?: \(([^()\n]{1,300})\))?")
_PIP_HINT = lazy(r"`?pip install ([A-Za-z0-9][\w.-]{0,60})`?")
_GLIBC = lazy(r"(/[\w./-]*libc\.so\.6): version `(GLIBC_[\d.]+)' not found")
LIBRARY_PATH = lazy(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_]\w{0,60})")
_STDLIB = lazy(r"[/\\]lib[/\\]python\d[\d.]*[/\\](?!site-packages|dist-packages)|^<")
_PY_NAME = lazy(r"^[A-Za-z_][\w.]{0,80}$")
_PKG = lazy(r"^[A-Za-z0-9][\w.-]{0,60}$")
def _module_check(module: str) -> str:
    top = module.split(".")[0]
    return (f"python -c 'import sys; print(sys.executable)'; python -m pip show {top}"
            f"   # the interpreter the job runs and whether {top} is installed in it (its pip name may differ)")


def imports(text: str) -> list[str]:
    out: list[str] = []
    if (m := _GLIBC.search(text)) is not None:
        out.append(f"ldd --version | head -1; strings {shlex.quote(m.group(1))} | grep -E '^GLIBC_2' | sort -V | tail -3"
                   f"   # the newest glibc this host has; the wheel needs {m.group(2)}")
        return out
    if (m := _CANNOT_IMPORT.search(text)) is not None:
        name, module, path = m.group(1), m.group(2), m.group(3)
        if path and not LIBRARY_PATH.search(path) and path.endswith(".py"):
            out.append(f"grep -n -w {shlex.quote(name)} {shlex.quote(path)}   # is {name} defined in the file Python imported "
                       f"{module} from (a stale copy, a name changed)?")
        else:
            out.append(_module_check(module))
        return out
    if (m := _NO_MODULE.search(text)) is not None and _PY_NAME.match(m.group(1)):
        return [_module_check(m.group(1))]
    if (m := _PIP_HINT.search(text)) is not None and _PKG.match(m.group(1)):
        return [f"python -m pip show {m.group(1)}   # is it installed in the interpreter the job runs"]
    return []


_API_MISMATCH = lazy(r"unexpected keyword|positional argument|required (?:positional |keyword-only )?argument|has no attribute|"
                     r"is (?:invalid|not supported|deprecated|incompatible)|Allowed \w+ values|requires? (?:torch|transformers|\w+>=)|no longer|renamed|removed")


def library(tb: TracebackEvent | None, frames: list[tuple[str, int, str]], message: str) -> str | None:
    """The installed package whose API refused the call (a keyword it does not take, a value it does not allow): the exception
    type's own package, or the innermost library frame. None when the message is not about an API."""
    if not _API_MISMATCH.search(message):
        return None
    if tb is not None and "." in tb.exc_type:
        top = tb.exc_type.split(".")[0]
        if top not in ("builtins", "__main__") and _PY_NAME.match(top):
            return top
    for file, _, _ in reversed(frames):
        if (m := LIBRARY_PATH.search(file)) is not None:
            return m.group(1)
    return None


def version_of(pkg: str) -> str:
    return (f"python -c 'import {pkg}; print({pkg}.__version__, {pkg}.__file__)'"
            f"   # the {pkg} the job imports: the API the error is about belongs to this version")


def own_line(frames: list[tuple[str, int, str]]) -> str | None:
    """The innermost frame of the run's own code: the line that raised, or that called into the library that did."""
    for file, line, func in reversed(frames):
        if LIBRARY_PATH.search(file) or _STDLIB.search(file) or not file.endswith(".py") or "..." in file:
            continue
        start = max(1, line - 3)
        where = "at the script's top level" if func.startswith("<") else f"in {func[:60]}"
        return (f"sed -n '{start},{line + 3}p' {shlex.quote(file)}   # line {line} of the run's own code, {where}, "
                "where it failed (from the run's working directory)")
    return None
