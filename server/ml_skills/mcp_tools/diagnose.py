"""diagnose: the whole engine on any target the CLI takes; writes check-failed-run.json into the out dir.

The answer is the brief (render/brief.py): every fact of the text report, with the bulky parts
named in `detail` only. Its text content is the report itself, its structured content the same
facts as fields (clients hand their model one or the other), never the whole file twice.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar

import pydantic_core
from pydantic import Field, PrivateAttr

from ml_skills import targets
from ml_skills.errors import InputError, UnreadableInput
from ml_skills.mcp_tools.common import WRITES_REPORT, ToolResult, config, roots, tool, tracker_target
from ml_skills.models import EvidenceStatus, Framework, Task
from ml_skills.render import brief, json_report
from ml_skills.render import fields as fields_mod
from ml_skills.render.brief import Brief, Part
from ml_skills.render.text import NO_NEXT_COMMAND
from ml_skills.safety import untrusted_json
from ml_skills.safety.paths import (
    confine,
    confine_new,
    held_out_dir_in_roots,
    normalise_roots,
    open_out_dir,
    read_capped,
    within,
)
from ml_skills.safety.quoting import name_or_quoted, new_marker, quote_inline, strip_invisible
from ml_skills.safety.redact import stripped_count
from ml_skills.targets import Confine


class DiagnoseResult(Brief, ToolResult):
    """The brief of the diagnosis; `text` is the report a content-reading client shows its model."""

    _compact: ClassVar[bool] = True
    _text: str = PrivateAttr("")

    def content_text(self) -> str:
        return self._text


def _strip_all(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return strip_invisible(value)
    if isinstance(value, list):
        pairs = [_strip_all(v) for v in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        pairs2 = {k: _strip_all(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs2.items()}, sum(n for _, n in pairs2.values())
    return value, 0


def _quoted(b: Brief, marker: str) -> Brief:
    """The brief as the model gets it: every field that can carry log or source text marked as quoted data.

    The report file keeps the plain text; here a log line that reads like an instruction (in the
    evidence, the root cause, the run's facts, a tracker's report line or the insufficient-evidence
    note) sits between this call's markers; decisive_lines is fenced already. Ruled-out reasons are
    the engine's own words (a signature id, a line number, a score: engine/classify/), never log text.
    """
    def q(t: str | None) -> str | None:
        return quote_inline(t, marker) if t else t

    def cmd(t: str | None) -> str | None:  # a command rebuilt from the run's own launch line carries its words
        return q(t) if t and t != NO_NEXT_COMMAND else t

    rc = b.root_cause
    return b.model_copy(update={
        "next_commands": [cmd(c) for c in b.next_commands],
        "fixes": [f.model_copy(update={"command": cmd(f.command), "because": q(f.because) or ""}) for f in b.fixes],
        "evidence": [q(e) for e in b.evidence],
        "root_cause": rc.model_copy(update={"proximate": q(rc.proximate), "root": q(rc.root), "contributing": [q(x) for x in rc.contributing]}),
        "run_facts": q(b.run_facts) or "",
        "report_lines": [q(x) for x in b.report_lines],
        "insufficient_evidence": q(b.insufficient_evidence),
        # a file's name and path, plain when one word of a path (seventy-sixth round: a log named as an instruction came back bare)
        "logs": {name_or_quoted(k, marker): name_or_quoted(v, marker) for k, v in b.logs.items()},
        # the parts asked for in `detail` are the report's own fields, which quote the log and the run's files as the brief
        # does (an evidence item's line, a fact's launch command, the inventory's launch_command and latest_pointer): every
        # string marked as read_report marks it; before the fourteenth round they came back bare. The excerpt is fenced.
        "detail": {k: v if k == Part.EXCERPT.value else _marked(v, marker) for k, v in b.detail.items()} if b.detail else b.detail,
    })


def _annotation(i: targets.Input) -> Any:
    if i.integer:
        return Annotated[int | None, Field(ge=1, le=i.upper, description=i.description)]
    return Annotated[str | None, Field(min_length=1, max_length=i.max_length, description=i.description)]


def _confined(i: targets.Input, value: Any, r: list[Path]) -> Any:
    """Each input held to the roots the way the registry declares (a process brings its own evidence)."""
    match i.confine:
        case Confine.PATH:
            return str(confine(value, r, want="any"))
        case Confine.PATH_OR_REMOTE:
            return value if targets.is_remote(value) else str(confine(value, r, want="any"))
        case Confine.PATH_OR_RUN:
            return tracker_target(value)
        case Confine.NONE | Confine.PROCESS:
            return value


def with_target_parameters(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One keyword parameter per target input of the registry (targets.py), ahead of `fn`'s own options.

    `fn` gets the one input given, confined, as `given`; the description's `{targets}` names them all.
    """
    inputs = targets.mcp_inputs()
    own = inspect.signature(fn, eval_str=True)
    params = [inspect.Parameter(i.field, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=_annotation(i)) for i in inputs]
    params += [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for name, p in own.parameters.items() if name != "given"]

    @functools.wraps(fn)
    def tool_fn(**kwargs: Any) -> Any:
        values = {i: kwargs.pop(i.field, None) for i in inputs}
        given = {i: v for i, v in values.items() if v is not None}
        if len(given) != 1:
            raise InputError(f"give exactly one of {targets.choices(inputs, mcp=True)}"
                             + (f" (got {', '.join(i.field for i in given)})" if given else ""))
        (i, v), = given.items()
        return fn(given=(i, _confined(i, v, roots())), **kwargs)

    tool_fn.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
    tool_fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": own.return_annotation}
    tool_fn.__doc__ = (fn.__doc__ or "").replace("{targets}", targets.either([i.phrase for i in inputs]))
    return tool_fn


def _held_out_dir(out: Path, confined: bool) -> int:
    """The out dir created and opened now, each missing level made from the fd of the one above it with no link
    followed: a caller's from its root; the server's own --out-dir, as configured."""
    if confined:
        return held_out_dir_in_roots(out)
    return open_out_dir(out)  # the server's own, as configured: still that folder, not a link planted at its name


@tool(title="Diagnose a failed run", annotations=WRITES_REPORT, deadline=300.0)
@with_target_parameters
def diagnose(
    given: tuple[targets.Input, Any],
    project: Annotated[str | None, Field(max_length=64, description="GCP project, with vertex_pipeline (not needed with a full resource name).")] = None,
    region: Annotated[str | None, Field(max_length=64, description="GCP region, with vertex_pipeline (not needed with a full resource name).")] = None,
    artifacts: Annotated[str | None, Field(max_length=4096, description="Artifact directory to inventory alongside a log.")] = None,
    framework: Annotated[Framework | None, Field(description="Narrow checks to a framework (default: detected).")] = None,
    task: Annotated[Task | None, Field(description="Tune expectations for the task.")] = None,
    last: Annotated[int, Field(ge=1, le=100_000, description="Lines of the tail kept for context.")] = 500,
    out_dir: Annotated[str | None, Field(max_length=4096, description="Where check-failed-run.json goes (default: the server's --out-dir).")] = None,
    detail: Annotated[list[Part] | None, Field(max_length=len(Part), description=(
        "Bulky parts of the report to add (left out by default; the answer's left_out says what each holds): "
        + ", ".join(p.value for p in Part) + "."))] = None,
) -> DiagnoseResult:
    """Run the whole diagnosis engine on one target and return the structured diagnosis: run status,
    primary cause with confidence, ruled-out classes, root cause, ranked fixes with risk levels and
    GO / NO-GO, as the text report shows them, plus the path of check-failed-run.json. Trajectory
    points, every anomaly, the full ruled-out list and artifact inventories are left out (left_out
    counts them): name them in `detail`, or read them later with read_report. The target is {targets}:
    give exactly one. Reads only; writes check-failed-run.json into the out dir and returns its path."""
    inp, value = given
    if (project or region) and inp is not targets.VERTEX_PIPELINE:
        raise InputError("project and region go with vertex_pipeline only")
    r = roots()
    a = str(confine(artifacts, r, want="dir")) if artifacts else None
    out = confine_new(out_dir, r) if out_dir else config().out_dir
    dfd = _held_out_dir(out, confined=out_dir is not None)  # the folder checked now is the one written when the diagnosis ends
    from ml_skills.engine.pipeline import DiagnoseRequest  # the engine is imported at the first call: tools/list stays fast
    from ml_skills.engine.pipeline import diagnose as run_engine

    gone = stripped_count()
    try:
        d = run_engine(DiagnoseRequest(**{inp.field: value}, project=project, region=region, once=True,
                                       artifacts=a, framework=framework, task=task, last=last),
                       risk_of=config().policy.risk_of)  # fixes rated by the policy request_action enforces
        path = json_report.write(d, out, dir_fd=dfd)  # stripped and redacted as its last step
    finally:
        os.close(dfd)
    stripped = stripped_count() - gone
    marker = new_marker()
    b, notes = brief.build(d, str(path), marker, detail)
    status = EvidenceStatus.OK if d.primary_cause is not None else EvidenceStatus.PARTIAL
    result = DiagnoseResult(status=status, redactions=d.redactions, stripped_chars=stripped, marker=marker, notes=notes,
                            truncated=bool(notes), **dict(_quoted(b, marker)))
    result._text = _report_text(result)  # the report's shape, each field that quotes the log marked as data
    return result


def _report_text(r: DiagnoseResult) -> str:
    """The brief in the report's shape, then any note and the parts asked for (compact JSON)."""
    out = brief.render(r)
    if r.redactions:
        out += f"({r.redactions} secret(s) redacted)\n"
    for note in r.notes:
        out += f"Note: {note}\n"
    if r.detail:
        out += "Detail: " + pydantic_core.to_json(r.detail, inf_nan_mode="null").decode() + "\n"
    return out


class ReportFields(ToolResult):
    path: str = Field(description="The report that was read.")
    fields: dict[str, Any] = Field(default_factory=dict, description="Each field asked for, by its path, in the order asked.")


MAX_REPORT_BYTES = 32 * 1024 * 1024


@tool(title="Read fields of a diagnosis report")
def read_report(
    fields: Annotated[list[str], Field(min_length=1, max_length=fields_mod.MAX_FIELDS, description=(
        "Dotted paths into check-failed-run.json: a key (trajectory, anomalies, artifacts), a key of an object "
        "(root_cause.root, artifacts.checkpoints), an index into a list (fixes.0) or a key of every item of a list "
        "(fixes.risk_rule, trajectory.name)."))],
    path: Annotated[str | None, Field(min_length=1, max_length=4096, description=(
        "A check-failed-run.json inside the allowed roots or the out dir (default: the one diagnose last wrote "
        "into the server's out dir)."))] = None,
) -> ReportFields:
    """Read named fields of a check-failed-run.json that diagnose wrote, without diagnosing again:
    the parts diagnose leaves out by default (trajectory points, every anomaly, the whole ruled-out
    list, artifact inventories, findings, fix ids and risk rules). An unknown field is an error that
    lists the fields there are. Reads only; capped in size (truncated and notes say what was cut)."""
    paths = fields_mod.parse(fields)
    cfg = config()
    p = confine(path, [*roots(), cfg.out_dir], want="file") if path else cfg.out_dir / json_report.FILENAME
    if not p.is_file():
        raise InputError(f"no report at {p}: call diagnose first, or give the path of a check-failed-run.json")
    try:  # opened through held fds from its root, as every other read: a folder swapped meanwhile is refused
        with within(normalise_roots([*roots(), cfg.out_dir])):
            raw = read_capped(p, MAX_REPORT_BYTES)
    except UnreadableInput:
        raise InputError(f"{p} is over {MAX_REPORT_BYTES // (1024 * 1024)} MiB or unreadable: not a report diagnose wrote") from None
    try:
        data = untrusted_json.loads(raw)
    except ValueError as e:
        raise InputError(f"{p} is not a JSON report ({str(e)[:200]}): give the path of a check-failed-run.json") from None
    if not isinstance(data, dict) or "primary_cause" not in data or "schema_version" not in data:
        raise InputError(f"{p} is not a check-failed-run.json (no schema_version or primary_cause)")
    try:
        selected = fields_mod.select(data, paths)
    except InputError as e:  # an unknown field's error lists the report's own keys: data, as its values are (eighteenth round)
        ours, sep, keys = str(e).partition(" fields are ")
        raise InputError(ours + sep + quote_inline(keys, new_marker()) if sep else str(e)) from None
    picked, stripped = _strip_all(selected)
    out: dict[str, Any] = {}
    notes: list[str] = []
    budget = brief.DETAIL_MAX_CHARS
    for k, v in picked.items():
        value, note = brief.cap(k, v, budget)
        if note:
            notes.append(note)
        if value is not None or note is None:
            out[k] = value
            budget -= brief.size(value)
    marker = new_marker()  # the report quotes the log, and any file in the roots can be given as one: every string is data
    out = {k: _marked(v, marker) for k, v in out.items()}
    return ReportFields(status=EvidenceStatus.OK, path=str(p), fields=out, notes=notes, truncated=bool(notes), stripped_chars=stripped,
                        marker=marker)


_WORD = re.compile(r"[A-Za-z0-9_.:/+=\-]{0,64}")


def _marked(value: Any, marker: str) -> Any:
    """Every string of a field read from a report file, marked as quoted data: diagnose marks the fields that quote
    the log (root_cause, evidence, findings, next commands), the report file keeps them plain, and read_report handed
    them back bare (a report planted in a run folder, or the log's own words in a real one)."""
    if isinstance(value, str):  # a name or a value (nan-inf, grad_norm, 0.001, train.log:12) stays plain: one word holds no sentence
        return value if _WORD.fullmatch(value) else quote_inline(value, marker)
    if isinstance(value, list):
        return [_marked(x, marker) for x in value]
    if isinstance(value, dict):  # keys too: a planted report's key can be a sentence (ninth round)
        return {_marked(str(k), marker): _marked(v, marker) for k, v in value.items()}
    return value


TOOLS = [diagnose, read_report]
