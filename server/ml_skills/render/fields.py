"""Named fields of a written report, picked by dotted path: what `--fields` and read_report return.

A path walks objects by key (`root_cause.root`), lists by index (`fixes.0`), and a name applied
to a list is applied to each item (`fixes.risk` gives every fix's risk), so a shell user or an
assistant asks for the part it needs instead of reading the whole report.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from ml_skills.errors import InputError

MAX_FIELDS = 40


def parse(spec: str | list[str]) -> list[str]:
    """`a,b.c` (or a list) into paths; empty names are refused."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    paths = [p.strip() for p in items]
    if not paths or any(not p or any(not s for s in p.split(".")) for p in paths):
        raise InputError(f"--fields takes field names separated by commas, like primary_cause,fixes.risk (got {spec!r})")
    if len(paths) > MAX_FIELDS:
        raise InputError(f"ask for at most {MAX_FIELDS} fields at a time (got {len(paths)})")
    return list(dict.fromkeys(paths))


MAX_LISTED_NAMES = 40


def _listed(value: dict[str, Any]) -> str:
    """The fields of an object, as an error lists them: the first MAX_LISTED_NAMES, each cut to 80 characters, and how many
    more (eighteenth round: a planted report of 200,000 keys made one error of 1.6 MB, redacted whole before it was cut)."""
    names = [str(k)[:80] for k, _ in zip(value, range(MAX_LISTED_NAMES), strict=False)]
    more = len(value) - len(names)
    return ", ".join(names) + (f" (and {more} more)" if more > 0 else "")


# An index into a list: ASCII digits, as int() reads them (str.isdigit() also takes '²', which int() refuses), and few
# enough that int() takes them (over 4,300 digits it raises): `fixes.²` and an index of 5,000 digits "failed unexpectedly"
_INDEX = re.compile(r"-?[0-9]{1,18}")


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(v), "a number")


def did_you_mean(name: str, names: list[str]) -> str:
    """' (did you mean run_status?)' for a field name close to one of `names`, or '': a user trial asked for `status`
    fifteen times over, reading past the whole list that followed."""
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.5) or [n for n in names if name in n][:1]
    return f" (did you mean {near[0]}?)" if near else ""


def _pick(value: Any, segs: list[str], walked: list[str], path: str) -> Any:
    if not segs:
        return value
    s, rest = segs[0], segs[1:]
    here = ".".join(walked) or "the report"
    if isinstance(value, dict):
        if s not in value:
            hint = did_you_mean(s, [str(k) for k in value])
            if not walked:
                raise InputError(f"unknown field {path!r}{hint}: the report's top-level fields are {_listed(value)}")
            raise InputError(f"unknown field {path!r}{hint}: {here} has no field {s!r}; its fields are {_listed(value)}")
        return _pick(value[s], rest, [*walked, s], path)
    if isinstance(value, list):
        if _INDEX.fullmatch(s):
            i = int(s)
            if not -len(value) <= i < len(value):
                raise InputError(f"unknown field {path!r}: {here} has {len(value)} item(s)")
            return _pick(value[i], rest, [*walked, s], path)
        return [None if item is None else _pick(item, segs, [*walked, "*"], path) for item in value]
    raise InputError(f"unknown field {path!r}: {here} is {_kind(value)}, with no field {s!r}")


# The words a person (and an assistant's brief) uses for the report's top-level fields: two user trials asked for `status`
# sixteen and fifteen times over before reading the hint. Each is read as the field it names, and answered under that name.
ALIASES = {"status": "run_status", "class": "primary_cause", "cause": "primary_cause", "failure_class": "primary_cause"}


def resolved(data: dict[str, Any], path: str) -> str:
    """`path` with a top-level alias replaced by the field it names (when the report has no field of that name itself)."""
    head, _, rest = path.partition(".")
    if head in ALIASES and head not in data and ALIASES[head] in data:
        return ALIASES[head] + ("." + rest if rest else "")
    return path


def pick(data: dict[str, Any], path: str) -> Any:
    path = resolved(data, path)
    return _pick(data, path.split("."), [], path)


def select(data: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """{path: value} for each path, in the order asked (an alias under the field it names); the first unknown path
    raises InputError."""
    return {resolved(data, p): pick(data, p) for p in paths}


def dumps(value: Any, pretty: bool = False) -> str:
    """JSON as the CLI prints it: compact unless asked to be pretty; NaN and Inf as null, as in the report.
    pydantic_core imported here: `--fields` only (a run without it imports no pydantic, modelkit.py)."""
    import pydantic_core

    return pydantic_core.to_json(value, indent=2 if pretty else None, inf_nan_mode="null").decode()
