"""Multi-pattern matching over byte chunks: Hyperscan when it is installed, `re` otherwise.

Patterns are written per line. Before compiling, `line_safe` keeps every pattern inside one
line (negated classes and \\s never cross a newline) so that matching a whole chunk at once
finds exactly what matching line by line would, in both engines.

A pattern may have a gate: a cheaper pattern that every line it matches also matches. The gate
takes the pattern's place in the main database, reported once per chunk; only a chunk where a
gate fired is scanned again for the gated patterns. This is for patterns keyed on text found on
every training line (`loss`, `grad_norm`) that match only rare values (nan, 1e+05): Hyperscan
confirms a pattern after each occurrence of its key, so such a key costs as much per byte as a
dozen ordinary signatures.

The `re` engine (a small log in a fresh process, scan.py) runs only the patterns its Hyperscan database, when the
cache holds it, reports in the chunk: the same matches in the same order as running them all.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from ml_skills import dbcache
from ml_skills.lazyre import lazy

try:  # the fast path; a binary wheel exists for common platforms
    import hyperscan

    _hs: ModuleType | None = hyperscan
except ImportError:  # pragma: no cover - exercised by forcing the fallback in tests
    _hs = None


class ScanLimit(Exception):
    """More matches than the caller's limit: `found` holds the first ones (in the engine's order)."""

    def __init__(self, found: list[tuple[int, int]]):
        super().__init__(f"more than {len(found)} matches")
        self.found = found


_SPECIAL = lazy(r"[\\\[\].]")  # the characters line_safe reads; the runs between them are copied whole


def line_safe(pattern: str) -> str:
    """Rewrite a per-line regex so it cannot match across a newline.

    `\\s` becomes the whitespace but the newline, `.` and `[^` outside a class exclude it. Runs of other characters
    are copied at once (the catalog's 31,000 pattern characters: 1 ms instead of 4 for one character at a time)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    opener = -1  # where in `out` the open class's '[' stands: a ']' right after it is one of the class's
    while (m := _SPECIAL.search(pattern, i)) is not None:
        j = m.start()
        if j > i:
            out.append(pattern[i:j])
        c = pattern[j]
        i = j + 1
        if c == "\\":
            if i < n:  # an escaped pair is copied as it is, but \s
                pair = pattern[j : j + 2]
                out.append(("\\t\\x0b\\x0c\\r " if in_class else "[\\t\\x0b\\x0c\\r ]") if pair == "\\s" else pair)
                i = j + 2
                continue
        elif c == "[":
            if not in_class:
                in_class, opener = True, len(out)
                if pattern[i : i + 1] == "^":
                    out.append("[^\\n")
                    i += 1
                    continue
        elif c == "]":
            # a ']' right after the '[' (or '[^') is one of the class's; after an escaped '\[' it closes the class
            if in_class and len(out) > opener + 1:
                in_class = False
        elif not in_class:  # '.'
            out.append("[^\\n]")
            continue
        out.append(c)
    out.append(pattern[i:])
    return "".join(out)


class Matcher:
    """Find which of many patterns match in a chunk of bytes, with the end offset of each match."""

    def __init__(self, patterns: Sequence[str], *, single: Sequence[bool] | None = None, engine: str | None = None,
                 gates: Sequence[str | None] | None = None, prefilter: bool = False):
        """`prefilter`: Hyperscan may report a superset of the matches (it then accepts look-arounds and
        back-references): for callers that confirm each reported line with `re`."""
        single = list(single) if single is not None else [False] * len(patterns)
        self.engine = engine or ("hyperscan" if _hs is not None else "re")
        self._gated_ids = [i for i, g in enumerate(gates or []) if g]
        self._gated = Matcher([patterns[i] for i in self._gated_ids], single=[single[i] for i in self._gated_ids],
                              engine=self.engine, prefilter=prefilter) if self._gated_ids else None
        self._gate_id = len(patterns)  # every gate reports this id, once per chunk
        kept = [i for i in range(len(patterns)) if i not in set(self._gated_ids)]
        self._ids = kept + [self._gate_id] * len(self._gated_ids)
        self.patterns = [line_safe(p) for p in [patterns[i] for i in kept] + [gates[i] for i in self._gated_ids]]  # type: ignore[index,misc]
        self.single = [single[i] for i in kept] + [True] * len(self._gated_ids)
        self._db: Any = None  # a Hyperscan database: the engine's, or the `re` engine's guide (see _reported)
        if self.engine == "hyperscan":
            if _hs is None:
                raise RuntimeError("hyperscan is not installed")
            self._db = dbcache.compiled(_hs, [p.encode() for p in self.patterns], self._ids, self._flags(prefilter), _hs.HS_MODE_BLOCK)
        else:
            from ml_skills.catalog import recache  # the programs kept between runs: compiling them is most of a small log's run

            self._res = recache.compile_set([p.encode() for p in self.patterns], re.MULTILINE)
            if _hs is not None:  # the same patterns' Hyperscan database, when the cache holds it: which ones to run
                with dbcache.cached_only(), contextlib.suppress(dbcache.NotCached):
                    self._db = dbcache.compiled(_hs, [p.encode() for p in self.patterns], self._ids, self._flags(prefilter), _hs.HS_MODE_BLOCK)
        if self._db is not None:
            self._scratch = _hs.Scratch(self._db)  # type: ignore[union-attr]  # _db is only set with _hs
            self._local = threading.local()  # a scratch is one scan's working memory: one per thread

    def _flags(self, prefilter: bool) -> list[int]:
        assert _hs is not None
        return [_hs.HS_FLAG_MULTILINE | _hs.HS_FLAG_ALLOWEMPTY | (_hs.HS_FLAG_SINGLEMATCH if s else 0)
                | (_hs.HS_FLAG_PREFILTER if prefilter else 0) for s in self.single]

    def _reported(self, chunk: bytes | bytearray) -> set[int] | None:
        """The `re` engine's ids that may match in the chunk: those its Hyperscan database reports (a gate's id
        stands for every gate), or None (every id) without the database."""
        if self._db is None:
            return None
        ids: set[int] = set()

        def on_match(idx: int, _from: int, _to: int, _flags: int, _ctx: object) -> bool:
            ids.add(idx)
            return False

        self._db.scan(chunk, match_event_handler=on_match, scratch=self._thread_scratch())
        return ids

    def find(self, chunk: bytes | bytearray, limit: int | None = None) -> list[tuple[int, int]]:
        """All (pattern index, end offset) matches in the chunk, sorted by offset.

        Patterns marked `single` report at most one match per call. With `limit`, the scan stops
        at that many matches and raises ScanLimit holding them.
        """
        gated = self._gated is not None and limit is not None
        try:
            found = self._scan(chunk, limit + len(self._gated_ids) if gated else limit)  # type: ignore[operator]  # a gate reports once
        except ScanLimit as e:
            raise ScanLimit([f for f in e.found if f[0] != self._gate_id]) from None
        if self._gated is None or all(idx != self._gate_id for idx, _ in found):
            return found
        found = [f for f in found if f[0] != self._gate_id]
        try:
            more = self._gated.find(chunk, None if limit is None else limit - len(found))
        except ScanLimit as e:
            raise ScanLimit(sorted(found + [(self._gated_ids[i], end) for i, end in e.found], key=lambda t: (t[1], t[0]))) from None
        found += [(self._gated_ids[i], end) for i, end in more]
        found.sort(key=lambda t: (t[1], t[0]))
        return found

    def _thread_scratch(self):  # type: ignore[no-untyped-def]
        """This thread's scratch space. Matchers are cached and shared, and the MCP server runs
        tool calls in worker threads: two scans at once on one scratch fail (ScratchInUseError)."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._scratch.clone()
        return scratch

    def _scan(self, chunk: bytes | bytearray, limit: int | None) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        if self.engine == "hyperscan":
            # Hyperscan reports every end of a match: `errors\.\w+` once per letter of the word, a trailing
            # `.*` once per byte to the end of the line. A report one byte after the same pattern's last
            # one, with no newline between, is that match grown on the same line: it adds nothing to a
            # per-line answer, and on a long line repeating a signature it is most of the reports.
            last_end: dict[int, int] = {}

            def on_match(idx: int, _from: int, to: int, _flags: int, _ctx: object) -> bool:
                grown = last_end.get(idx) == to - 1 and to >= 2 and chunk[to - 1] != 10 and chunk[to - 2] != 10
                last_end[idx] = to
                if grown:
                    return False
                found.append((idx, to))
                return limit is not None and len(found) >= limit

            assert _hs is not None  # __init__ refuses engine="hyperscan" without it
            try:
                self._db.scan(chunk, match_event_handler=on_match, scratch=self._thread_scratch())
            except _hs.ScanTerminated:
                found.sort(key=lambda t: (t[1], t[0]))
                raise ScanLimit(found) from None
        else:
            # Hyperscan's report, when there is one, only skips the patterns it did not report: the two engines find
            # the same patterns matching in a chunk (tests/engine/test_small_log_engine.py), so the ones left give
            # `re`'s own matches in `re`'s own order, as if every pattern had been run.
            reported = self._reported(chunk)
            for k in range(len(self._res)):
                idx = self._ids[k]
                if reported is not None and idx not in reported:
                    continue
                rx = self._res[k]
                if self.single[k]:
                    m = rx.search(chunk)
                    if m:
                        found.append((idx, m.end()))
                else:
                    for m in rx.finditer(chunk):
                        found.append((idx, m.end()))
                        if limit is not None and len(found) >= limit:
                            found.sort(key=lambda t: (t[1], t[0]))
                            raise ScanLimit(found)
        found.sort(key=lambda t: (t[1], t[0]))
        return found
