"""Load the catalog's TOML data into typed models, once per process.

Adding a signature touches one file in signatures/; nothing here changes.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from importlib import resources

from ml_skills import diskcache
from ml_skills.lazyre import lazy
from ml_skills.modelkit import BaseModel, ConfigDict, Field
from ml_skills.models import FailureClass, FixTemplate, Signature, new_list


class ExceptionRule(BaseModel):
    """Maps a Python exception (type, message, frames) to a failure class."""

    model_config = ConfigDict(extra="forbid")

    id: str
    failure_class: FailureClass
    exc_type: str = ".*"
    message: str = ".*"
    frames: str | None = None
    weight: float = 1.0
    # the frames name the channel another process was lost on (a multiprocessing pipe): a symptom signature on the
    # exception line ('Connection reset by peer', which NCCL's teardown prints too) makes it a symptom, not that class
    names_the_channel: bool = False
    meaning: str = ""
    fixes: list[str] = Field(default_factory=new_list)


MAGIC = b"MLSKCAT1\n"
KEEP = 8  # parsed catalogs kept in the cache directory (one per catalog version met)


@cache
def _parsed() -> dict[str, dict]:
    """Every TOML file of the catalog, parsed, by name ('signatures/oom.toml', 'fixes.toml'), signatures in file order.

    Parsing the TOML costs about 25 ms, a twentieth of a one-shot run on an everyday log; the same data loads from
    JSON in under 1 ms, so it is kept in the cache directory (diskcache.py) under a hash of every file's name
    and text: an edited catalog is parsed again. Data JSON cannot hold exactly is never cached."""
    root = resources.files("ml_skills.catalog")
    names = [f"signatures/{e.name}" for e in sorted(root.joinpath("signatures").iterdir(), key=lambda p: p.name)
             if e.name.endswith(".toml")]
    texts = {name: root.joinpath(*name.split("/")).read_text("utf-8") for name in [*names, "fixes.toml", "exceptions.toml"]}
    h = hashlib.sha256(MAGIC)
    for name, text in texts.items():
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    key = h.hexdigest()[:40]
    path = diskcache.cache_dir() / f"catalog-{key}.json"
    data = diskcache.read_json(path, key, MAGIC)
    if isinstance(data, dict) and list(data) == list(texts):
        return data
    import tomllib  # only when the cache cannot answer

    data = {name: tomllib.loads(text) for name, text in texts.items()}
    blob = json.dumps(data).encode()
    if json.loads(blob) == data:
        diskcache.write(path, key, blob, MAGIC, KEEP)
    return data


def _read(name: str) -> dict:
    return _parsed()[name]


@cache
def signatures() -> tuple[Signature, ...]:
    """Every signature, in file order per class; ids are unique (checked in tests)."""
    out: list[Signature] = []
    for name, data in _parsed().items():
        if not name.startswith("signatures/"):
            continue
        cls = data["failure_class"]
        for raw in data.get("signature", []):
            out.append(Signature(failure_class=cls, **raw))
    return tuple(out)


@cache
def fixes() -> dict[str, FixTemplate]:
    return {raw["id"]: FixTemplate(**raw) for raw in _read("fixes.toml")["fix"]}


@cache
def exception_rules() -> tuple[ExceptionRule, ...]:
    return tuple(ExceptionRule(**raw) for raw in _read("exceptions.toml")["rule"])


@cache
def compiled_exception_rules() -> tuple[tuple[ExceptionRule, re.Pattern[str], re.Pattern[str], re.Pattern[str] | None], ...]:
    return tuple(
        (r, lazy(r.exc_type), lazy(r.message), lazy(r.frames) if r.frames else None)
        for r in exception_rules()
    )
