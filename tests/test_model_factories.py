"""The models every CLI run builds name no builtin as a default factory.

Pydantic reads each default factory's signature while it builds a model: a builtin's (`list`, `dict`) is parsed from
its text signature with `tokenize`, ten times the cost of a Python function's, and models.py alone has 49 such
fields (8 ms of every start; docs/performance.md, issue 17's fifth round). models.new_list and new_dict stand in.
"""

from __future__ import annotations

import inspect

from ml_skills import models
from ml_skills.catalog import loader
from ml_skills.policy import rules
from pydantic import BaseModel


def test_no_model_the_cli_builds_uses_a_builtin_default_factory():
    classes = [c for mod in (models, rules, loader) for c in vars(mod).values()
               if inspect.isclass(c) and issubclass(c, BaseModel) and c.__module__ == mod.__name__]
    assert len(classes) > 30
    builtin = [f"{c.__name__}.{name}" for c in classes for name, f in c.model_fields.items()
               if getattr(f.default_factory, "__module__", None) == "builtins"]
    assert builtin == []


def test_the_stand_ins_give_a_new_object_each_time():
    a, b = models.new_list(), models.new_list()
    assert a == [] and a is not b
    c, d = models.new_dict(), models.new_dict()
    assert c == {} and c is not d
