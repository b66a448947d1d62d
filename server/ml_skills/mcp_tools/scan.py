"""scan_log: failure signatures and the metric trajectory of one log, thin over engine/scan."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ml_skills.lazyre import lazy
from ml_skills.mcp_tools.common import ToolResult, roots, tool
from ml_skills.mcp_tools.logs import PathArg
from ml_skills.models import Anomaly, EvidenceStatus, FailureClass, LogTime, Model, Role, SeriesSummary, Severity
from ml_skills.safety.paths import confine
from ml_skills.safety.quoting import clean, fence, name_or_quoted, new_marker, quote_inline

# An exception type shown bare: a dotted name whose parts are identifiers, the last a class name ending as exception
# classes do, 100 characters in all. Anything else the parser took for a type is log text, marked like the message
# (thirtieth round: 2,000 characters of instructions joined by dots came back bare).
_PLAIN_EXC_TYPE = lazy(r"(?=.{1,100}$)(?:[A-Za-z_][A-Za-z0-9_]{0,39}\.){0,6}[A-Z][A-Za-z0-9]{0,48}"
                       r"(?:Error|Exception|Interrupt|Exit|Warning|Iteration|Abort|Fault|Failure|Timeout|Cancelled)")


def exc_type_shown(exc_type: str, marker: str) -> str:
    """The exception type bare when it reads as one, else marked as quoted data."""
    return exc_type if _PLAIN_EXC_TYPE.fullmatch(exc_type) else quote_inline(exc_type, marker)


class SignatureFound(Model):
    signature_id: str
    failure_class: FailureClass
    role: Role
    severity: Severity
    line_no: int = Field(description="First line that matched; its text is in `quoted`.")
    count: int = Field(description="Lines of the log that matched this signature.")
    last_line_no: int | None = None


class TracebackFound(Model):
    line_no: int
    exc_type: str
    message: str = Field(description="Cleaned, capped and marked as quoted data ('[data MARKER] ... [/data MARKER]'); "
                                     "the full text is in `quoted`.")


class TrajectorySummary(Model):
    last_step: float | None = None
    first_nan_step: float | None = None
    first_nan_line: int | None = None
    loss_trend: str | None = Field(None, description="Trend of the training loss: falling, rising, flat, noisy, too-short.")
    val_loss_trend: str | None = None
    throughput_trend: str | None = None
    last_progress_line: int | None = None
    last_progress_step: float | None = None
    last_progress_time: LogTime | None = None
    spikes: list[Anomaly] = Field(default_factory=list, description="NaN onset, loss blow-ups, grad-norm spikes, throughput collapse...")
    series: list[SeriesSummary] = Field(default_factory=list)
    metric_lines: int = 0


class ScanResult(ToolResult):
    source: str
    size_bytes: int
    total_lines: int
    frameworks: dict[str, int] = Field(default_factory=dict)
    signatures: list[SignatureFound] = Field(default_factory=list)
    tracebacks: list[TracebackFound] = Field(default_factory=list)
    trajectory: TrajectorySummary
    quoted: str = Field("", description="The log lines behind each finding ('line N [what]: text'), fenced as quoted data.")


def _trend(series: list[SeriesSummary], want: tuple[str, ...], splits: tuple[str, ...]) -> str | None:
    for s in series:
        if s.split in splits and any(w in s.name.lower() for w in want):
            return s.trend
    return None


@tool(title="Scan a log for failure signatures and metric trends", deadline=120.0)
def scan_log(
    path: PathArg,
    last: Annotated[int, Field(ge=1, le=100_000, description="Lines of the tail the engine keeps for context.")] = 500,
) -> ScanResult:
    """Scan a whole log once: the failure signatures found (class, line), Python tracebacks, and the
    metric trajectory (last step, first NaN step, spikes, loss / val-loss / throughput trends, last
    progress). Call it after read_log_tail to locate the failure; use read_log_window on a line."""
    from ml_skills.engine.read import scan as engine_scan  # the engine is imported at the first call: tools/list stays fast

    p = confine(path, roots())
    ev = engine_scan.scan_log(p, last=last)
    marker = new_marker()
    quoted: list[str] = []
    stripped = 0
    sigs = []
    for h in ev.hits:
        sigs.append(SignatureFound(signature_id=h.signature_id, failure_class=h.failure_class, role=h.role, severity=h.severity,
                                   line_no=h.line_no, count=h.count, last_line_no=h.last_line_no))
        quoted.append(f"line {h.line_no} [{h.signature_id}]: {h.text}")
    tbs = []
    for t in ev.tracebacks[:40]:
        c = clean(t.message, 300)
        stripped += c.stripped
        tbs.append(TracebackFound(line_no=t.line_no, exc_type=exc_type_shown(clean(t.exc_type, 200).text, marker), message=quote_inline(c.text, marker)))
        quoted.append(f"line {t.line_no} [traceback]: {t.exc_type}: {t.message}")
    tr = ev.trajectory
    # Series without their points (the trend is the answer here); names and details come from the log: cleaned.
    series = [s.model_copy(update={"name": clean(s.name, 100).text, "split": clean(s.split, 40).text, "points": []}) for s in tr.series[:40]]
    spikes = [a.model_copy(update={"detail": quote_inline(clean(a.detail, 400).text, marker), "source": name_or_quoted(str(p), marker)}) for a in tr.anomalies[:50]]
    lp = tr.last_progress
    if lp is not None:
        quoted.append(f"line {lp.line_no} [last progress]: {lp.text}")
    summary = TrajectorySummary(
        last_step=tr.last_step, first_nan_step=tr.first_nan_step, first_nan_line=tr.first_nan_line,
        loss_trend=_trend(series, ("loss",), ("train",)), val_loss_trend=_trend(series, ("loss",), ("val", "eval", "validation", "test")),
        throughput_trend=_trend(series, ("it/s", "samples_per_second", "tokens", "throughput", "samples/s", "steps_per_second"), ("train",)),
        last_progress_line=lp.line_no if lp else None, last_progress_step=lp.step if lp else None, last_progress_time=lp.time if lp else None,
        spikes=spikes, series=series, metric_lines=tr.metric_lines,
    )
    f = fence(quoted, marker=marker, label=f"findings in {p}")
    status = ev.status if ev.status is not EvidenceStatus.OK or ev.total_lines else EvidenceStatus.NO_DATA
    return ScanResult(status=status, truncated=f.truncated, redactions=ev.redactions + f.redactions, stripped_chars=stripped + f.stripped,
                      marker=marker, notes=[clean(x, 400).text for x in ev.problems], source=name_or_quoted(str(p), marker), size_bytes=ev.size_bytes,
                      total_lines=ev.total_lines, frameworks=ev.frameworks, signatures=sigs, tracebacks=tbs, trajectory=summary, quoted=f.text)


TOOLS = [scan_log]
