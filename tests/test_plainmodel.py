"""plainmodel.py's classes stand in for pydantic's on the CLI's everyday path: the same validation of the values the
models take, the same JSON to the byte, the same fields, and a `check-failed-run` on a log file that imports no
pydantic and writes main's report. bench/cli_outputs.py compares the two on every corpus and healthy log."""

from __future__ import annotations

import json
import math
import random
import struct
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any

import pydantic
import pydantic_core
import pytest
from ml_skills import models, plainjson, plainmodel
from ml_skills.catalog import loader
from ml_skills.engine import pipeline
from ml_skills.policy import rules
from pydantic import BaseModel, TypeAdapter, ValidationError

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted((ROOT / "tests" / "corpus").glob("*/train.log"))


def _random_floats(n: int) -> list[float]:
    rnd = random.Random(17)
    out = [0.0, -0.0, 1.0, 0.1, 1e-5, 9.999999e-6, 1e-4, 1e15, 1e16, 1e21, 1e22, 123456789.0, 5e-324, 1.7976931348623157e308]
    for _ in range(n):
        bits = rnd.getrandbits(64)
        f = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
        if math.isfinite(f):
            out.append(f)
        out.append(rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-30, 30))
    return out


def test_floats_are_spelled_as_pydantic_core_spells_them():
    floats = [*_random_floats(20000), math.nan, math.inf, -math.inf]
    for f in floats:
        assert plainjson.float_text(f) == pydantic_core.to_json(f, inf_nan_mode="null").decode(), f


@pytest.mark.parametrize("t", [
    datetime(2024, 1, 2, 3, 4, 5), datetime(2024, 1, 2, 3, 4, 5, 120), datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
    datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=-3))), datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999),
])
def test_datetimes_are_spelled_as_pydantic_core_spells_them(t):
    assert json.dumps(plainjson.datetime_text(t)) == pydantic_core.to_json(t).decode()


def test_strings_and_layout_are_pydantic_cores():
    rnd = random.Random(3)
    alphabet = [chr(c) for c in [*range(0x30), 0x5C, 0x7F, 0x80, 0xA0, 0xE9, 0x2028, 0x2029, 0xFEFF, 0x1F600]] + list("ab\"'/")
    strings = ["".join(rnd.choices(alphabet, k=rnd.randint(0, 12))) for _ in range(3000)]
    data = {"s": strings, "n": [1, -2, 10**20, 0.5, None, True, False], "e": [], "d": {}, "nest": [{"a": [[]], "b": {"c": {}}}]}
    for indent in (None, 2):
        assert plainjson.dumps(data, indent) == pydantic_core.to_json(data, indent=indent).decode()


_CASES: list[tuple[Any, list[Any]]] = [
    (str, ["x", models.Risk.SAFE, 1, None, b"x"]),
    (int, [3, True, 3.0, 3.5, "7", "x", None]),
    (float, [1, 1.5, True, "2.5", "nan", "x", None]),
    (bool, [True, 0, 1, 2, "yes", "off", "maybe", None]),
    (models.Risk, ["safe", models.Risk.DANGEROUS, "nope", 1]),
    (int | None, [None, 4, "x"]),
    (list[str], [["a", models.Risk.SAFE], ("a",), "a", [1]]),
    (dict[str, float], [{"a": 1}, {"a": "x"}, []]),
    (tuple[float, float | None], [(1, None), [2, 3], (1,), "ab"]),
    (Annotated[datetime, models.WithJsonSchema({})], [datetime(2024, 1, 1), None]),
    (Any, [object]),
]


@pytest.mark.parametrize(("tp", "values"), _CASES)
def test_values_are_validated_as_pydantic_validates_them(tp, values):
    convert = plainmodel.converter(tp) or (lambda v: v)
    adapter = TypeAdapter(tp)
    for v in values:
        try:
            want = adapter.validate_python(v)
        except ValidationError:
            with pytest.raises(plainmodel.ValidationError):
                convert(v)
            continue
        got = convert(v)
        assert repr(got) == repr(want) and type(got) is type(want), (tp, v)  # repr: NaN is NaN
        assert [type(x) for x in got] == [type(x) for x in want] if isinstance(want, (list, tuple)) else True


_PLAIN_FIELDS = """
import json, sys, typing
from ml_skills import modelkit
assert modelkit.use_plain()
from ml_skills import models
from ml_skills.catalog import loader
from ml_skills.engine import pipeline
from ml_skills.policy import rules
top = lambda a: typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a
out = {}
for mod in (models, loader, pipeline, rules):
    for name, c in vars(mod).items():
        if isinstance(c, type) and issubclass(c, modelkit.BaseModel) and c.__module__ == mod.__name__:
            out[f"{mod.__name__}.{name}"] = [[k, repr(top(f.annotation)), f.is_required(), repr(f.get_default()) if not f.is_required() else None,
                                              f.exclude, f.ge, f.le] for k, f in c.model_fields.items()]
print(json.dumps(out))
assert "pydantic" not in sys.modules
"""


def test_the_plain_classes_have_the_pydantic_models_fields():
    got = json.loads(subprocess.run([sys.executable, "-c", _PLAIN_FIELDS], capture_output=True, text=True, check=True).stdout)
    want = {}
    for mod in (models, loader, pipeline, rules):
        for name, c in vars(mod).items():
            if isinstance(c, type) and issubclass(c, BaseModel) and c.__module__ == mod.__name__:
                want[f"{mod.__name__}.{name}"] = [
                    [k, repr(f.annotation), f.is_required(), repr(f.get_default(call_default_factory=True)) if not f.is_required() else None,
                     bool(f.exclude), _bound(f, "ge"), _bound(f, "le")] for k, f in c.model_fields.items()]
    assert len(want) > 35
    assert got == want


def _bound(f: Any, name: str) -> float | None:
    return next((getattr(m, name) for m in f.metadata if hasattr(m, name)), None)


_SAMPLE = [*CORPUS[::240], *sorted((ROOT / "tests" / "healthy").glob("*/train.log"))[::240]]


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_the_cli_on_a_log_imports_no_pydantic_and_writes_the_pydantic_report(tmp_path, fmt):
    from ml_skills import cli

    for log in _SAMPLE:
        plain_out, out = tmp_path / f"p-{log.parent.name}", tmp_path / f"m-{log.parent.name}"
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ml_skills.cli", "check-failed-run", str(log),
                               "--out-dir", str(out), "--format", fmt], capture_output=True, text=True, check=False)
        imported = [line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
        assert "ml_skills.plainmodel" in imported and not [m for m in imported if m.startswith("pydantic")], log
        stdout, stderr = _in_process(cli, log, plain_out, fmt)
        assert proc.returncode == 0
        assert _same(proc.stdout, out) == _same(stdout, plain_out), log
        assert [x for x in proc.stderr.splitlines() if not x.startswith("import time:")] == stderr.splitlines()
        assert _same((out / "check-failed-run.json").read_text(), out) == _same((plain_out / "check-failed-run.json").read_text(), plain_out)


def _in_process(cli: Any, log: Path, out: Path, fmt: str) -> tuple[str, str]:
    """The same command through cli.main in this process, whose models are pydantic's, reading the log with the engine
    a fresh process chooses."""
    import contextlib
    import io

    from ml_skills.engine.read import scan

    scan._compiled.clear()
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        assert cli.main(["check-failed-run", str(log), "--out-dir", str(out), "--format", fmt]) == 0
    return stdout.getvalue(), stderr.getvalue()


def _same(text: str, out: Path) -> str:
    import re

    return re.sub(r'"created_at": ?"[^"]*"', "", text).replace(str(out), "<OUT>")


def test_a_field_is_declared_as_pydantic_declares_it():
    class M(plainmodel.BaseModel):
        model_config = plainmodel.ConfigDict(extra="forbid")
        a: int = plainmodel.Field(...)
        b: float = plainmodel.Field(default=2)
        c: list[str] = plainmodel.Field(default_factory=list, exclude=True)
        d: float = plainmodel.Field(0.5, ge=0.0, le=1.0)

    m = M(a=1)
    assert (m.a, m.b, m.c, m.d) == (1, 2, [], 0.5) and m.model_dump() == {"a": 1, "b": 2, "d": 0.5}
    assert m.model_dump_json() == '{"a":1,"b":2.0,"d":0.5}'  # a float field's int default written as a float
    assert M(a=1).c is not m.c and M(a="2").a == 2
    for bad in ({}, {"a": 1, "e": 0}, {"a": 1, "d": 1.5}, {"a": "x"}):
        with pytest.raises(plainmodel.ValidationError):
            M(**bad)
    with pytest.raises(TypeError):
        plainmodel.Field(1, alias="x")
    with pytest.raises(TypeError, match="pydantic's FieldInfo"):  # a module that imports pydantic's Field itself
        type("N", (plainmodel.BaseModel,), {"__annotations__": {"a": int}, "a": pydantic.Field(1), "__module__": __name__})


def test_a_last_the_request_refuses_is_refused_in_pydantic_s_words(tmp_path):
    log = CORPUS[0]
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", str(log), "--out-dir", str(tmp_path),
                           "--last", str(pipeline.targets.MAX_LAST + 1)], capture_output=True, text=True, check=False)
    assert proc.returncode == 3 and "1 validation error for DiagnoseRequest" in proc.stderr
    assert pipeline.RequestOptions.model_fields["last"].metadata[-1].le == pipeline.targets.MAX_LAST
