"""A plain model's JSON, spelled byte for byte as pydantic-core's `model_dump_json` spells it (plainmodel.py).

pydantic-core writes a model by its fields' types: an int in a float field as `1.0`, an enum as its value, a tuple
as a list, a datetime in ISO 8601 with `Z` for UTC and whole-minute offsets, NaN and infinities as `null`, fields
marked `exclude` left out. Its floats are Python's shortest repr but for the exponent: `1e-7` (not `1e-07`) and
`0.00001` (Python's `1e-05`: pydantic-core writes the decimal down to 1e-5). Strings escape `"`, `\\` and the
control characters below U+0020 (`\\n` and its kin, else `\\u00XX`), as `json`'s encoder does, and nothing else.
The layout is `json.dumps`'s with separators `,` and `:`, or with `indent`. tests/test_plainmodel.py compares every
spelling with pydantic-core's on random floats, datetimes, strings and every corpus report.
"""

from __future__ import annotations

import math
import types
import typing
from datetime import datetime
from enum import Enum
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any


def float_text(f: float) -> str:
    if not math.isfinite(f):
        return "null"
    r = repr(f)
    e = r.find("e")
    if e < 0:
        return r
    mantissa, exp = r[:e], int(r[e + 1:])
    if exp == -5:  # pydantic-core writes the decimal down to 1e-5
        sign = "-" if mantissa.startswith("-") else ""
        return f"{sign}0.0000{mantissa.lstrip('-').replace('.', '')}"
    return f"{mantissa}e{'+' if exp > 0 else '-'}{abs(exp)}"


def datetime_text(t: datetime) -> str:
    """ISO 8601 as pydantic-core writes it: `Z` for a zero offset, an offset in whole minutes (seconds dropped)."""
    off = t.utcoffset()
    text = t.replace(tzinfo=None).isoformat()
    if off is None:
        return text
    seconds = int(off.total_seconds())
    if seconds == 0:
        return text + "Z"
    minutes = abs(seconds) // 60
    return f"{text}{'-' if seconds < 0 else '+'}{minutes // 60:02d}:{minutes % 60:02d}"


def jsonable_model(m: Any) -> dict[str, Any]:
    """A plain model's `model_dump(mode="json")`: every field but the excluded, each by its annotation. (A model is
    known by its class's `model_fields`: plainmodel.py imports this module, not the reverse.)"""
    out = {}
    for name, info in type(m).model_fields.items():
        if not info.exclude:
            out[name] = jsonable(m.__dict__[name], info.annotation)
    return out


def jsonable(v: Any, tp: Any = Any) -> Any:
    """A value of annotation `tp` as JSON data (a float field's int as a float, as pydantic-core's float serializer)."""
    if v is None or type(v) is str or type(v) is bool:
        return v
    if type(v) is int:
        return float(v) if _is_float(tp) else v
    if type(v) is float:
        return v
    if type(v) is list or type(v) is tuple:
        item = _item_type(tp)
        if item is not None:
            return [jsonable(x, t) for x, t in zip(v, item, strict=False)]
        args = typing.get_args(_strip(tp))
        return [jsonable(x, args[0] if args else Any) for x in v]
    if type(v) is dict:
        args = typing.get_args(_strip(tp))
        vt = args[1] if len(args) == 2 else Any
        return {_key(k): jsonable(x, vt) for k, x in v.items()}
    return _other(v)


def _other(v: Any) -> Any:
    if hasattr(type(v), "model_fields"):
        return jsonable_model(v)
    if isinstance(v, Enum):
        return jsonable(v.value)
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, datetime):
        return datetime_text(v)
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, (int, float)):
        return float(v) if isinstance(v, float) else int(v)
    raise TypeError(f"plainjson: no JSON for {type(v).__name__}")


def _strip(tp: Any) -> Any:
    """The annotation without `| None` and `Annotated[...]`."""
    while True:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            tp = args[0]
        elif origin in (typing.Union, types.UnionType):
            rest = [a for a in args if a is not type(None)]
            if len(rest) != 1:
                return tp
            tp = rest[0]
        else:
            return tp


def _is_float(tp: Any) -> bool:
    return tp is float or (tp is not Any and _strip(tp) is float)


def _item_type(tp: Any) -> tuple[Any, ...] | None:
    """The item annotations of a fixed-length tuple annotation, else None."""
    t = _strip(tp)
    if typing.get_origin(t) is tuple:
        return typing.get_args(t)
    return None


def _key(k: Any) -> str:
    if type(k) is str:
        return k
    if isinstance(k, Enum):
        return str(k.value)
    if isinstance(k, str):
        return str.__str__(k)
    if isinstance(k, bool):
        return "true" if k else "false"
    if isinstance(k, float):
        return float_text(k)
    return str(k)


def dumps(data: Any, indent: int | None = None) -> str:
    """JSON data (dicts with str keys, lists, str, int, float, bool, None) as text."""
    parts: list[str] = []
    _write(data, parts, indent, 0)
    return "".join(parts)


def _write(v: Any, out: list[str], indent: int | None, level: int) -> None:
    if type(v) is str:
        out.append(encode_basestring(v))
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif type(v) is int:
        out.append(int.__repr__(v))
    elif type(v) is float:
        out.append(float_text(v))
    elif type(v) is dict:
        _write_items([(encode_basestring(k) + (": " if indent is not None else ":"), x) for k, x in v.items()],
                     "{", "}", out, indent, level)
    elif type(v) is list:
        _write_items([("", x) for x in v], "[", "]", out, indent, level)
    else:
        raise TypeError(f"plainjson: not JSON data: {type(v).__name__}")


def _write_items(items: list[tuple[str, Any]], left: str, right: str, out: list[str], indent: int | None, level: int) -> None:
    if not items:
        out.append(left + right)
        return
    if indent is None:
        out.append(left)
        for i, (head, x) in enumerate(items):
            if i:
                out.append(",")
            out.append(head)
            _write(x, out, None, level)
        out.append(right)
        return
    inner = "\n" + " " * (indent * (level + 1))
    out.append(left)
    for i, (head, x) in enumerate(items):
        out.append(("," if i else "") + inner + head)
        _write(x, out, indent, level + 1)
    out.append("\n" + " " * (indent * level) + right)
