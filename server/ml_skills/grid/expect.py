"""--expect: the cells a grid should have, against the runs and result files that are there.

Catches the two expensive mistakes of a sweep's bookkeeping: a cell believed done that never ran
(or whose result landed somewhere else), and a cell believed missing whose result exists. A
result file belongs to the cell named by its file stem or by the directory that holds it.
"""

from __future__ import annotations

import csv
import glob
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from ml_skills.errors import InputError, MLSkillsError, TargetNotFound, UnreadableInput
from ml_skills.grid.discover import allows
from ml_skills.grid.globs import MAX_LISTED, bounded_glob
from ml_skills.grid.models import ExpectReport, Outcome, RunRecord
from ml_skills.lazyre import lazy
from ml_skills.safety import paths

MAX_GRID_BYTES = 8 * 1024 * 1024
MAX_NAME = 1024  # a cell name longer than this is not a name
_NAME_COLUMNS = ("name", "cell", "run", "run_name", "id")


def read_grid(path: str, run_names: Sequence[str] = ()) -> list[str]:
    """Cell names from a CSV (a name/cell/run column, else the first) or YAML (a list, or {cells: [...]}).

    A CSV of parameters with a header and no name column ('lr,batch_size,seed' over rows of values, the grid a sweep
    launcher iterates) names each cell by the run whose folder name carries every value of its row (lr0.003_bs32_s1),
    or 'lr=0.003 batch_size=32 seed=1' when no run does."""
    p = Path(path)
    if not p.is_file():
        raise TargetNotFound(f"no grid file at {path}: give a CSV or YAML of cell names, or a quoted glob of result files")
    try:  # through a held fd, regular files only, never more than the cap in memory (a 5 GB file, a FIFO swapped in)
        raw = paths.read_capped(p, MAX_GRID_BYTES)
    except UnreadableInput as e:
        raise InputError(f"{path}: {e}; a grid of cell names is a CSV or YAML under 8 MiB") from None
    text = raw.decode("utf-8", errors="replace")
    if p.suffix.lower() in (".yaml", ".yml"):
        return _from_yaml(path, text)
    try:
        rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    except csv.Error as e:  # a field over the csv module's limit (128 KiB), a NUL byte
        raise InputError(f"{path} is not a CSV of cell names: {e}") from None
    if not rows:
        return []
    header = [c.strip().lower() for c in rows[0]]
    col = next((header.index(c) for c in _NAME_COLUMNS if c in header), None)
    if col is None and _parameter_header(rows):
        index = run_index(run_names)
        return _unique(_name(path, _cell(rows[0], r, index)) for r in rows[1:])
    body = rows[1:] if col is not None else rows
    return _unique(_name(path, r[col or 0].strip()) for r in body if len(r) > (col or 0) and r[col or 0].strip())


_IDENT = lazy(r"[A-Za-z_][\w.-]*+")
_TOKEN = lazy(r"[^_\-/=,\s]++")
_PREFIXED = lazy(r"([A-Za-z]*+)(.+)")  # a value after its key's letters: 'lr0.003', 'bs32', 's1'


def _parameter_header(rows: list[list[str]]) -> bool:
    """Two or more columns under a header of identifiers, and a first data row that is not one: parameters, not names."""
    head = [c.strip() for c in rows[0]]
    return (len(head) >= 2 and len(rows) > 1 and all(_IDENT.fullmatch(c) for c in head)
            and not all(_IDENT.fullmatch(c.strip()) for c in rows[1]))


def _same_value(a: str, b: str) -> bool:
    return a == b or _key(a) == _key(b)


def _carries(run: str, values: list[str]) -> bool:
    """Every value is a token of the run's name after a prefix of letters only ('lr0.003', 'bs32', 's1', '32'),
    each on a token of its own."""
    tokens = _TOKEN.findall(run)
    used: set[int] = set()
    for v in values:
        hit = next((i for i, t in enumerate(tokens) if i not in used
                    and (m := _PREFIXED.fullmatch(t)) is not None and _same_value(m.group(2), v)), None)
        if hit is None:
            return False
        used.add(hit)
    return True


def _key(value: str) -> str:
    """A value as a cell and a run's name compare it: a number by its float, anything else by its text."""
    try:
        f = float(value)
    except ValueError:
        return value
    return value if math.isnan(f) else repr(f)  # NaN equals only its own text


RunIndex = dict[str, set[str]]


def run_index(run_names: Sequence[str]) -> RunIndex:
    """Each value a run's name carries (the part of a token after its letters) -> the runs carrying it: a row of the
    grid is then matched against the few runs that hold its values, not every run (rows x runs took 207 s for 150,000
    rows and 400 runs)."""
    index: RunIndex = {}
    for n in run_names:
        for t in _TOKEN.findall(n):
            if (m := _PREFIXED.fullmatch(t)) is not None:
                index.setdefault(_key(m.group(2)), set()).add(n)
    return index


def _cell(header: list[str], row: list[str], index: RunIndex) -> str:
    values = [c.strip() for c in row]
    candidates: set[str] | None = None
    for v in values:
        runs = index.get(_key(v), set())
        candidates = runs if candidates is None else candidates & runs
        if not candidates:
            break
    found = [n for n in sorted(candidates or ()) if _carries(n, values)]
    if len(found) == 1:
        return found[0]
    return " ".join(f"{h.strip()}={v}" for h, v in zip(header, values, strict=False))


def _from_yaml(path: str, text: str) -> list[str]:
    try:
        import yaml
    except ImportError:
        raise InputError(f"{path}: reading a YAML grid needs PyYAML (pip install pyyaml); or give a CSV of cell names") from None
    try:  # every scalar kept as the string written: a cell name is one, and safe_load's int() of 5,000 digits and
        # date() of '2024-13-45' raised ValueError, an internal error (thirty-first round)
        data = yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as e:
        raise InputError(f"{path} is not valid YAML: {str(e).splitlines()[0]}") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise InputError(f"{path}: YAML nested too deep to be a list of cell names") from None
    if isinstance(data, dict):
        data = data.get("cells", data.get("runs"))
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a list of cell names, or a mapping with a 'cells' list")
    names = []
    for item in data:
        if isinstance(item, dict):
            item = next((item[k] for k in _NAME_COLUMNS if k in item), None)
        if item is None or item == "":
            continue
        if isinstance(item, (list, dict, set, tuple)):  # str() of aliased lists grows exponentially (billion laughs)
            raise InputError(f"{path}: a cell name must be a string or a number, not a {type(item).__name__}")
        names.append(_name(path, str(item)))
    return _unique(names)


def _name(path: str, name: str) -> str:
    if len(name) > MAX_NAME:
        raise InputError(f"{path}: a cell name of {len(name)} characters is not a cell name (at most {MAX_NAME})")
    return name


def _unique(names) -> list[str]:  # type: ignore[no-untyped-def]
    return list(dict.fromkeys(names))


def _owner(path: str, cells: set[str]) -> str:
    p = Path(path)
    for stem in (p.name, p.stem, p.name.split(".", 1)[0]):  # lr0.1-s1.json, metrics.tar.gz
        if stem in cells:
            return stem
    for parent in p.parents:
        if parent.name in cells:
            return parent.name
    return p.stem


def _inside(files: list[str], check: Callable[[str], str] | None, notes: list[str]) -> list[str]:
    """The matched files the check allows; a glob through a symlinked folder can match names outside the roots."""
    if check is None:
        return files
    kept = []
    for f in files:
        try:
            check(f)
        except MLSkillsError:
            continue
        kept.append(f)
    if len(kept) < len(files):
        notes.append(f"{len(files) - len(kept)} matched file(s) outside the allowed roots were left out, unnamed")
    return kept


def check_expected(grid: str, results: str | None, runs: list[RunRecord], check: Callable[[str], str] | None = None) -> ExpectReport:
    """Cells with no run, runs with no result, results of failed runs, results of no run.

    `check` (the MCP tool's confinement) drops every matched result file it refuses, before any is named."""
    by_name = {r.name: r for r in runs}
    notes: list[str] = []
    if glob.has_magic(grid):
        names: list[str] = []
        results = grid
    else:
        names = read_grid(grid, [r.name for r in runs])
    matched, whole = bounded_glob(results, inside=allows(check)) if results else ([], True)
    if not whole:
        notes.append(f"the glob {results} was stopped after {len(matched):,} matches or {MAX_LISTED:,} directory entries: "
                     "the result files past it were not compared")
    files = _inside(matched, check, notes)
    if results and not files:
        notes.append(f"no result file matches {results}")
    cells = set(names) | set(by_name)
    owners: dict[str, list[str]] = {}
    for f in files:
        owners.setdefault(_owner(f, cells), []).append(f)
    expected = names or sorted(owners)
    report = ExpectReport(expected=len(expected), notes=notes)
    report.cells_without_run = [n for n in expected if n not in by_name and n not in owners]
    report.results_without_run = sorted(f for n, fs in owners.items() if n not in by_name for f in fs)
    if results:
        report.runs_without_result = [r.name for r in runs if r.name not in owners and (not names or r.name in names)]
        report.completed_without_result = [n for n in report.runs_without_result if by_name[n].outcome is Outcome.COMPLETED]
        report.results_of_failed_runs = sorted(f for n, fs in owners.items() if n in by_name and by_name[n].outcome is Outcome.FAILED for f in fs)
    else:
        notes.append("no --results glob: which runs lack a result file was not checked")
    if names:
        extra = [r.name for r in runs if r.name not in set(names)]
        if extra:
            notes.append(f"{len(extra)} run(s) are not in the grid: " + ", ".join(extra[:5]) + (" ..." if len(extra) > 5 else ""))
    return report
