"""Plain classes with the part of pydantic's `BaseModel` that `check-failed-run` on a log file uses (issue 17).

A one-shot CLI run spent about 90 ms of a 0.3 s run importing pydantic's machinery (`pydantic.main`, `fields`,
`types`, `pydantic_core.core_schema`) and building the report's 40 model classes, work the reference
(`python -c "import pydantic"`) never does. modelkit.py hands the model modules these classes instead, when the CLI
(and only it, for that command on a log file) asks before they are imported; the MCP server, the schema generator and
every other command keep pydantic. The same models, the same reports: a test compares the two on every corpus log.

What is here is what those models use, done as pydantic does it and nothing else: fields from annotations, in
definition order, parents first; defaults (mutable ones copied), default factories, `ge`/`le`, `exclude`, extra
arguments refused; validation with pydantic's lax conversions of the types the models name (int to float, an enum's
value to the member, a str subclass to str, integral floats to int, lists, tuples, dicts and nested models copied
through); `model_construct`, `model_copy`, `model_dump`, `model_dump_json` (plainjson.py spells the JSON as
pydantic-core does), `model_validate`, `model_fields`, equality and repr. A type or option not listed raises
TypeError when its class is built or first instantiated, never a silent difference.
"""

from __future__ import annotations

import copy
import sys
import types
import typing
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar

from ml_skills import plainjson

MISSING: Any = object()
_FIELD_OPTIONS = frozenset({"default", "default_factory", "description", "exclude", "ge", "le"})


class ValidationError(ValueError):
    """A value the model's field does not take (pydantic's ValidationError is a ValueError too)."""

    def errors(self) -> list[dict[str, Any]]:
        """pydantic's shape, for a caller that reports the first error (policy/rules.py): the message names the field."""
        return [{"loc": (), "msg": str(self)}]


class FieldInfo:
    __slots__ = ("annotation", "default", "default_factory", "description", "exclude", "ge", "le")

    def __init__(self, default: Any = MISSING, default_factory: Callable[[], Any] | None = None, description: str | None = None,
                 exclude: bool = False, ge: float | None = None, le: float | None = None) -> None:
        self.annotation: Any = None
        self.default, self.default_factory, self.description = default, default_factory, description
        self.exclude, self.ge, self.le = exclude, ge, le

    def is_required(self) -> bool:
        return self.default is MISSING and self.default_factory is None

    def get_default(self) -> Any:
        """The default as pydantic gives it: a factory called, a mutable default copied (`smart_deepcopy`)."""
        if self.default_factory is not None:
            return self.default_factory()
        d = self.default
        if type(d) in (list, dict, set):
            return copy.deepcopy(d) if d else d.copy()
        return d


def Field(default: Any = MISSING, **options: Any) -> Any:
    unknown = set(options) - _FIELD_OPTIONS
    if unknown:
        raise TypeError(f"plainmodel.Field does not take {sorted(unknown)}")
    default = options.pop("default", default)
    return FieldInfo(MISSING if default is Ellipsis else default, **options)  # Field(...): required, as in pydantic


def ConfigDict(**options: Any) -> dict[str, Any]:
    if set(options) - {"extra"} or options.get("extra", "forbid") != "forbid":
        raise TypeError(f"plainmodel.ConfigDict takes only extra='forbid', not {options}")
    return options


class WithJsonSchema:
    """The JSON schema's business (gen.py, with pydantic): nothing to do for a value."""

    def __init__(self, json_schema: Any, mode: str | None = None) -> None:
        self.json_schema, self.mode = json_schema, mode

    def __repr__(self) -> str:
        return f"WithJsonSchema(json_schema={self.json_schema!r}, mode={self.mode!r})"


class BaseModel:
    """The plain stand-in for pydantic's BaseModel: an instance's fields are its `__dict__`, in the model's order."""

    __slots__ = ("__dict__", "__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__")
    model_config: ClassVar[dict[str, Any]] = {}
    model_fields: ClassVar[dict[str, FieldInfo]] = {}
    __plain_checks__: ClassVar[tuple[tuple[str, Callable[[Any], Any] | None, FieldInfo], ...] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.model_fields = _fields_of(cls)
        cls.__plain_checks__ = None  # the converters, made at the first instance

    def __init__(self, **data: Any) -> None:
        cls = type(self)
        checks = cls.__plain_checks__ or _make_checks(cls)
        if len(data) > len(checks) or not set(data) <= cls.model_fields.keys():
            extra = sorted(set(data) - cls.model_fields.keys())
            raise ValidationError(f"{cls.__name__}: {extra[0]}: extra inputs are not permitted")
        values = {}
        for name, convert, info in checks:
            if name in data:
                v = data[name]
                values[name] = convert(v) if convert is not None else v
                if info.ge is not None or info.le is not None:
                    _bounds(cls, name, values[name], info)
            elif info.is_required():
                raise ValidationError(f"{cls.__name__}: {name}: field required")
            else:
                values[name] = info.get_default()
        _set(self, "__dict__", values)
        _set(self, "__pydantic_fields_set__", set(data))
        _set(self, "__pydantic_extra__", None)
        _set(self, "__pydantic_private__", None)

    @classmethod
    def model_construct(cls, _fields_set: set[str] | None = None, **values: Any) -> Any:
        new = cls.__new__(cls)
        _set(new, "__dict__", {name: values[name] if name in values else info.get_default()
                               for name, info in cls.model_fields.items()})
        _set(new, "__pydantic_fields_set__", set(values) if _fields_set is None else _fields_set)
        _set(new, "__pydantic_extra__", None)
        _set(new, "__pydantic_private__", None)
        return new

    @classmethod
    def model_validate(cls, obj: Any) -> Any:
        if isinstance(obj, cls):
            return obj
        if not isinstance(obj, dict):
            raise ValidationError(f"{cls.__name__}: input should be a valid dictionary or instance")
        return cls(**obj)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Any:
        new = copy.deepcopy(self) if deep else copy.copy(self)
        if update:
            new.__dict__.update(update)
            _set(new, "__pydantic_fields_set__", _fields_set(self) | set(update))
        return new

    def __copy__(self) -> Any:
        new = type(self).__new__(type(self))
        _set(new, "__dict__", dict(self.__dict__))
        _set(new, "__pydantic_fields_set__", set(_fields_set(self)))
        _set(new, "__pydantic_extra__", None)
        _set(new, "__pydantic_private__", None)
        return new

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        if mode == "json":
            return plainjson.jsonable_model(self)
        if mode != "python":
            raise TypeError(f"plainmodel: model_dump(mode={mode!r})")
        return _python_dump(self)

    def model_dump_json(self, *, indent: int | None = None) -> str:
        return plainjson.dumps(plainjson.jsonable_model(self), indent)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseModel):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    # as pydantic's: a mutable model is not hashable
    __hash__ = None  # type: ignore[assignment]

    def __iter__(self) -> typing.Iterator[tuple[str, Any]]:
        yield from self.__dict__.items()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


_set = object.__setattr__


def _fields_set(m: BaseModel) -> set[str]:
    fields_set: set[str] = getattr(m, "__pydantic_fields_set__")  # noqa: B009 - a slot mypy cannot see
    return fields_set


def _bounds(cls: type, name: str, v: Any, info: FieldInfo) -> None:
    if v is None:
        return
    if info.ge is not None and not v >= info.ge:
        raise ValidationError(f"{cls.__name__}: {name}: input should be greater than or equal to {info.ge}")
    if info.le is not None and not v <= info.le:
        raise ValidationError(f"{cls.__name__}: {name}: input should be less than or equal to {info.le}")


def _fields_of(cls: type[BaseModel]) -> dict[str, FieldInfo]:
    """The class's fields, parents' first, then its own annotations in order (string annotations evaluated in its module)."""
    fields: dict[str, FieldInfo] = {}
    for base in reversed(cls.__mro__[1:]):
        if issubclass(base, BaseModel):
            fields.update(base.model_fields)
    own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - inspect.get_annotations would import inspect
    namespace = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
    for name, ann in own.items():
        if name.startswith("_") or name == "model_config":
            continue
        if isinstance(ann, str):
            ann = eval(ann, dict(namespace), dict(vars(cls)))
        if typing.get_origin(ann) is ClassVar:
            continue
        value = cls.__dict__.get(name, MISSING)
        if type(value).__module__.startswith("pydantic"):  # a module outside the plain path: say so, never misread it
            raise TypeError(f"plainmodel: {cls.__qualname__}.{name} is declared with pydantic's {type(value).__name__}")
        info = value if isinstance(value, FieldInfo) else FieldInfo(value)
        if name in cls.__dict__:
            delattr(cls, name)
        fields[name] = FieldInfo(info.default, info.default_factory, info.description, info.exclude, info.ge, info.le)
        fields[name].annotation = ann
    return fields


def _make_checks(cls: type[BaseModel]) -> tuple[tuple[str, Callable[[Any], Any] | None, FieldInfo], ...]:
    checks = tuple((name, converter(info.annotation), info) for name, info in cls.model_fields.items())
    cls.__plain_checks__ = checks
    return checks


def _python_dump(m: BaseModel) -> dict[str, Any]:
    fields = type(m).model_fields
    return {k: _python_value(v) for k, v in m.__dict__.items() if not fields[k].exclude}


def _python_value(v: Any) -> Any:
    if isinstance(v, BaseModel):
        return _python_dump(v)
    if type(v) is list:
        return [_python_value(x) for x in v]
    if type(v) is tuple:
        return tuple(_python_value(x) for x in v)
    if type(v) is dict:
        return {k: _python_value(x) for k, x in v.items()}
    return v


def create_model(name: str, *, __base__: type[BaseModel], __module__: str, __doc__: str | None = None,
                 **fields: tuple[Any, Any]) -> type[BaseModel]:
    """pydantic's create_model for what the engine asks of it: a subclass adding (annotation, Field) pairs."""
    namespace: dict[str, Any] = {"__module__": __module__, "__doc__": __doc__, "__qualname__": name,
                                 "__annotations__": {k: ann for k, (ann, _) in fields.items()}}
    namespace.update({k: default for k, (_, default) in fields.items()})
    return types.new_class(name, (__base__,), {}, lambda ns: ns.update(namespace))


# ---------------------------------------------------------------- converters: pydantic's lax validation of each type


def _str(v: Any) -> str:
    if type(v) is str:
        return v
    if isinstance(v, str):
        return str.__str__(v)  # an enum's value, a str subclass: pydantic keeps the plain str
    if isinstance(v, (bytes, bytearray)):
        try:
            return bytes(v).decode("utf-8")
        except UnicodeDecodeError:
            pass
    raise ValidationError(f"input should be a valid string, not {type(v).__name__}")


def _int(v: Any) -> int:
    if type(v) is int:
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            pass
    raise ValidationError(f"input should be a valid integer, not {v!r}")


def _float(v: Any) -> float:
    if type(v) is float:
        return v
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            pass
    raise ValidationError(f"input should be a valid number, not {v!r}")


_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


def _bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    if type(v) is int and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE
    raise ValidationError(f"input should be a valid boolean, not {v!r}")


def _bytes(v: Any) -> bytes:
    if type(v) is bytes:
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode()
    raise ValidationError(f"input should be a valid bytes value, not {type(v).__name__}")


def _datetime(v: Any) -> datetime:
    if isinstance(v, datetime):
        return v
    raise ValidationError(f"input should be a valid datetime, not {type(v).__name__}")


_SCALARS: dict[Any, Callable[[Any], Any]] = {str: _str, int: _int, float: _float, bool: _bool, bytes: _bytes, datetime: _datetime}


def converter(tp: Any) -> Callable[[Any], Any] | None:
    """The function that validates a value of annotation `tp` as pydantic would; None: any value as it is."""
    if tp is Any:
        return None
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return converter(args[0])
    if origin in (typing.Union, types.UnionType):
        return _optional(tp, args)
    if origin in (list, tuple, dict):
        return _container(tp, origin, args)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _model(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return _enum(tp)
    raise TypeError(f"plainmodel: no converter for {tp!r}")


def _optional(tp: Any, args: tuple[Any, ...]) -> Callable[[Any], Any] | None:
    rest = [a for a in args if a is not type(None)]
    if len(rest) != 1 or len(args) != 2:
        raise TypeError(f"plainmodel: only X | None unions, not {tp!r}")
    inner = converter(rest[0])
    if inner is None:
        return None
    return lambda v: None if v is None else inner(v)


def _container(tp: Any, origin: Any, args: tuple[Any, ...]) -> Callable[[Any], Any]:
    if origin is list:
        item = converter(args[0]) or _same

        def to_list(v: Any) -> list[Any]:
            if not isinstance(v, (list, tuple)):
                raise ValidationError(f"input should be a valid list, not {type(v).__name__}")
            return [item(x) for x in v]
        return to_list
    if origin is dict:
        key, value = converter(args[0]) or _same, converter(args[1]) or _same

        def to_dict(v: Any) -> dict[Any, Any]:
            if not isinstance(v, dict):
                raise ValidationError(f"input should be a valid dictionary, not {type(v).__name__}")
            return {key(k): value(x) for k, x in v.items()}
        return to_dict
    if len(args) == 2 and args[1] is Ellipsis or not args:
        raise TypeError(f"plainmodel: only fixed-length tuples, not {tp!r}")
    items = [converter(a) or _same for a in args]

    def to_tuple(v: Any) -> tuple[Any, ...]:
        if not isinstance(v, (list, tuple)) or len(v) != len(items):
            raise ValidationError(f"input should be a tuple of {len(items)} items, not {v!r}")
        return tuple(c(x) for c, x in zip(items, v, strict=True))
    return to_tuple


def _same(v: Any) -> Any:
    return v


def _model(tp: type[BaseModel]) -> Callable[[Any], Any]:
    def to_model(v: Any) -> Any:
        if isinstance(v, tp):
            return v
        if isinstance(v, dict):
            return tp(**v)
        raise ValidationError(f"input should be a valid dictionary or instance of {tp.__name__}")
    return to_model


def _enum(tp: type[Enum]) -> Callable[[Any], Any]:
    def to_member(v: Any) -> Any:
        if type(v) is tp:
            return v
        try:
            return tp(v)
        except ValueError:
            raise ValidationError(f"input should be one of {[m.value for m in tp]}, not {v!r}") from None
    return to_member
