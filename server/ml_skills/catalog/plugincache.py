"""Pydantic's plugin discovery, remembered between CLI runs when it found no plugin.

Building the first pydantic model looks for pydantic plugins: every installed distribution's entry points are read
(224 distributions here: 7-9 ms of a 0.3 s run on an everyday log, issue 17). A plugin is found only in a
distribution's metadata directory (`*.dist-info`, `*.egg-info`) at the top of a `sys.path` entry, and installing or
removing one adds or removes such a directory, which changes that entry's modification time. So when a scan found no
plugin, a sealed file of the cache directory (diskcache.py) remembers it under a name that hashes pydantic's
version file (its path, size and modification time: read without importing pydantic), every `sys.path` entry with its modification time and inode, and the import system's other finders of
distributions; a later run whose name matches tells pydantic's loader it found none, which is what its own scan would
find. Any change to those makes another name, read once again. `PYDANTIC_DISABLE_PLUGINS` set, or a plugin found,
means pydantic decides as it always does. A metadata file edited in place (not
reinstalled) is the one change not seen; `ml-skills` runs after a reinstall see it.

The CLI's everyday run builds no pydantic model at all (modelkit.py) only when this says the set holds no plugin
(`known_none`): a plugin installed is always handed the models it would have seen.
"""

from __future__ import annotations

import hashlib
import os
import sys
import types
from typing import Any

from ml_skills import diskcache

MAGIC = b"MLSKPL1\n"
NONE_FOUND = b"none"
SOME_FOUND = b"some"
KEEP = 8


def _loader() -> Any:
    from pydantic.plugin import _loader

    return _loader


class _MetadataOnUse(types.ModuleType):
    """`importlib.metadata` as pydantic's plugin loader sees it when the scan is known to find nothing: the real module
    (with `email`, `zipfile`, `csv`, `socket`: 6-10 ms of an everyday run, issue 17) is imported at the first use of
    any of its names, which a loader told there is no plugin never makes."""

    def __getattr__(self, name: str) -> Any:
        import importlib.metadata

        return getattr(importlib.metadata, name)


def _loader_metadata_on_use() -> Any:
    """pydantic's plugin loader, imported with `importlib.metadata` standing in as _MetadataOnUse when nothing has
    imported the real one yet. Only the loader's own name is bound to the stand-in: sys.modules and the `importlib`
    package are left as they were, so every other importer gets the real module."""
    if "pydantic.plugin._loader" in sys.modules or "importlib.metadata" in sys.modules:
        return _loader()
    import importlib

    stand_in = _MetadataOnUse("importlib.metadata")
    sys.modules["importlib.metadata"] = stand_in
    importlib.metadata = stand_in  # type: ignore[attr-defined]  # `import importlib.metadata as m` reads it here
    try:
        return _loader()
    finally:
        if sys.modules.get("importlib.metadata") is stand_in:
            del sys.modules["importlib.metadata"]
        if getattr(importlib, "metadata", None) is stand_in:
            del importlib.metadata  # type: ignore[attr-defined]


def key() -> str | None:
    """The name of this interpreter's plugin set, or None when pydantic's own switch decides."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") is not None:
        return None
    version = _pydantic_version_file()
    if version is None:
        return None
    h = hashlib.sha256(f"pydantic {version}\0{sys.version}\0".encode())
    for entry in sys.path:
        try:
            st = os.stat(entry or ".")
            h.update(f"{entry}\0{st.st_mtime_ns}\0{st.st_ino}\0".encode())
        except OSError:
            h.update(f"{entry}\0-\0".encode())
    for finder in sys.meta_path:  # a finder of its own can hold distributions too
        if hasattr(finder, "find_distributions"):
            h.update(f"{type(finder).__module__}.{type(finder).__qualname__}\0".encode())
    return h.hexdigest()[:40]


def _pydantic_version_file() -> str | None:
    """pydantic's version file, with its size and modification time, found (not imported: that is 25-30 ms, which the
    CLI's plain models spare) through the import system; None when there is none to find."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("pydantic")
        where = os.path.join(os.path.dirname(spec.origin), "version.py") if spec is not None and spec.origin else None
        st = os.stat(where) if where else None
    except (ImportError, ValueError, OSError):
        return None
    return f"{where}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}" if st is not None else None


def _path(k: str) -> Any:
    return diskcache.cache_dir() / f"plugins-{k}.txt"


def _has_plugins() -> bool:
    import importlib.metadata

    return any(True for _ in importlib.metadata.entry_points(group="pydantic"))


def skip_known_none() -> None:
    """Before the first model is built: when this plugin set holds no pydantic plugin (remembered, or read now and
    remembered), pydantic's loader is told so, and reads no distribution. Otherwise it scans as it always does."""
    k = key()
    if k is None:
        return
    known = _known(k)
    loader = _loader_metadata_on_use() if known == NONE_FOUND else _loader()
    if known == NONE_FOUND and getattr(loader, "_plugins", ...) is None:  # not scanned yet here (and pydantic's name)
        loader._plugins = {}


def _known(k: str) -> bytes:
    known = diskcache.read(_path(k), k, MAGIC)
    if known is None:  # this plugin set not seen yet: read it once (pydantic then need not)
        known = SOME_FOUND if _has_plugins() else NONE_FOUND
        diskcache.write(_path(k), k, known, MAGIC, KEEP)
    return known


def known_none() -> bool:
    """Whether this plugin set holds no pydantic plugin (remembered, or read now and remembered); False when pydantic's
    own switch decides (PYDANTIC_DISABLE_PLUGINS). The CLI's plain models (modelkit.py) need it: no plugin is there to
    miss the models they do not build."""
    k = key()
    return k is not None and _known(k) == NONE_FOUND
