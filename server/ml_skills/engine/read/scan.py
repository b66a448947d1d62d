"""One streaming pass over a log: signatures, tracebacks, metrics, progress, frameworks.

The file is read in chunks that end at a newline; one multi-pattern matcher finds every
catalog signature and a few internal markers in each chunk at once; line numbers come from
counting newlines. Which lines are parsed as metrics is metric_lines.py's choice: all of them on
logs up to FULL_METRICS_BYTES, an even sample per chunk above that (the exact first NaN line,
the largest grad norm (gradmax.py), the tail and sparse validation lines are always kept);
frameworks.py reads its markers in a few chunks only. Memory is bounded by the chunk size and
the caps below, never by the log's length.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from ml_skills.catalog.loader import signatures
from ml_skills.collectors import logfile
from ml_skills.engine.analyse import completion, evalsource, nanslots, schedule, skippedsteps, sparklines, valsize, zeroscores
from ml_skills.engine.analyse.lastprogress import check_stall, last_progress, stalled_before_kill
from ml_skills.engine.analyse.points import values_text
from ml_skills.engine.analyse.trajectories import analyse
from ml_skills.engine.read import frameworks, metric_lines, newlines, tracebacks
from ml_skills.engine.read.excerpts import Reader, quote_anomaly_lines
from ml_skills.engine.read.markers import MARKERS
from ml_skills.engine.read.matcher import Matcher
from ml_skills.engine.read.scanpass import TRACEBACKS_KEPT, Pass
from ml_skills.models import (
    AnomalyKind,
    EvidenceStatus,
    Excerpt,
    FailureClass,
    LogEvidence,
    LogLine,
    MetricPoint,
    Progress,
    ProgressPoint,
    Role,
    Signature,
    SignatureHit,
    Task,
)
from ml_skills.safety.redact import redact, redact_lines

FULL_METRICS_BYTES = 2 * 1024 * 1024  # above this, sampled: parsing every line costs about 1 s per 10k lines
SAMPLED_METRICS_PER_CHUNK = 48  # at most; fewer on longer logs so about SAMPLED_METRICS_TOTAL are parsed
SAMPLED_METRICS_TOTAL = 2048

# Below this size a process that has not compiled the Hyperscan database yet scans with `re`:
# compiling it takes about 0.9 s, `re` reads a 1 KB log in 0.02 s and a 24 KB one in 0.2 s. A
# one-shot CLI run on a pasted traceback or a short log answers in a third of the time; a running
# MCP server, once compiled, keeps using Hyperscan. Both engines find the same matches (tested).
# When the cache holds the databases, the `re` matchers run only the patterns Hyperscan reports in a chunk
# (matcher.py): `re`'s matches in `re`'s order, without trying the ~170 patterns that cannot match.
SMALL_LOG_BYTES = 32 * 1024
_compiled: set[str | None] = set()


def _engine_for(size: int, engine: str | None) -> str | None:
    if engine is not None or size >= SMALL_LOG_BYTES or None in _compiled or "hyperscan" in _compiled:
        return engine
    return "re"


def new_pass(name: str, size: int, budget: int | None, engine: str | None, continued: bool = False) -> Pass:
    matcher, sigs = _matcher(engine)
    return Pass(name, size, budget, engine, matcher, sigs, MARKERS, continued=continued)


@cache
def _matcher(engine: str | None = None) -> tuple[Matcher, tuple[Signature, ...]]:
    """The catalog's signatures, then the markers."""
    _compiled.add(engine)
    sigs = signatures()
    patterns = [s.pattern for s in sigs] + [p for _, p, _ in MARKERS]
    single = [False] * len(sigs) + [s for _, _, s in MARKERS]
    return Matcher(patterns, single=single, engine=engine, gates=[s.gate for s in sigs]), sigs


def warm_cache() -> int:
    """Build every pattern database a scan uses, and the `re` programs of a small log's scan, so that they are in
    the on-disk cache; how many matchers."""
    _matcher(None)
    _signature_matcher(None)
    frameworks._matcher(None)
    metric_lines._eval_matcher(None)
    from ml_skills.engine.plan import facts

    facts._prefilter()
    _matcher("re")  # and the programs of the `re` engine a small log is read with (catalog/recache.compile_set)
    frameworks._matcher("re")
    return 7


def scan_log(
    path: str | os.PathLike[str],
    *,
    source: str | None = None,
    last: int = 500,
    task: Task | None = None,
    engine: str | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
    parallel_bytes: int | None = None,
    chunk_size: int = logfile.CHUNK,
) -> LogEvidence:
    """Scan a whole log once and return what it holds. Raises InputError for unusable files.

    `progress` (render/progress.py) is told the bytes read after each chunk; the scan never prints.
    A log of `parallel_bytes` or more is scanned in `workers` processes (engine/parallel.py; the
    defaults come from the environment, else 128 MiB and every core); `chunk_size` is for tests.
    """
    p = logfile.check_readable(path)
    name = source or str(path)
    st = p.stat()
    ev = LogEvidence(source=name, size_bytes=st.st_size, mtime=datetime.fromtimestamp(st.st_mtime, UTC), siblings=logfile.siblings(p))
    why = logfile.looks_binary(p)
    if why:
        ev.status = EvidenceStatus.ERROR
        ev.problems.append(f"{name} is not a text log: {why}")
        return ev
    if st.st_size == 0:
        ev.status = EvidenceStatus.NO_DATA
        ev.problems.append(f"{name} is empty")
        return ev
    from ml_skills.engine.read import parallel

    ranges = parallel.plan(p, st.st_size, chunk_size, threshold=parallel_bytes, workers=workers)
    chunks = logfile.iter_chunks(p, size=chunk_size, limit=st.st_size)
    if progress is not None:
        chunks = _reporting(chunks, f"scanning {p.name}", st.st_size, progress)
    ev.offsets = _run(ev, chunks, Reader(path=p, end=st.st_size), st.st_size, last, task, engine, chunk_size, ranges, progress)
    ev.inode = st.st_ino
    _flag_if_changed(ev, p, st)
    return ev


def _reporting(chunks: Iterator[tuple[int, bytearray]], what: str, size: int, progress: Progress) -> Iterator[tuple[int, bytearray]]:
    """Pass the chunks through, telling `progress` how far the pass has got."""
    for offset, chunk in chunks:
        yield offset, chunk
        progress(what, offset + len(chunk), size, "B")


def _flag_if_changed(ev: LogEvidence, p: Path, before: os.stat_result) -> None:
    """A log that grew, was truncated or was replaced (rotated) during the pass is flagged, not trusted whole."""
    after = logfile.identity(p)
    if after is None or after != logfile.identity(p, before):
        ev.changed = True
        if ev.status is EvidenceStatus.OK:
            ev.status = EvidenceStatus.PARTIAL
        ev.problems.append(f"{ev.source} changed while it was read (grew, was truncated or rotated): this answer covers "
                           "what was read; read it again once the run stops writing")


def scan_text(text: str, *, source: str, last: int = 500, task: Task | None = None, engine: str | None = None) -> LogEvidence:
    """Scan text held in memory (a pasted traceback, a tracker's log) exactly like a file."""
    data = text.encode("utf-8", errors="replace")
    ev = LogEvidence(source=source, size_bytes=len(data))
    if not data.strip():
        ev.status = EvidenceStatus.NO_DATA
        ev.problems.append(f"{source} is empty")
        return ev
    if data.count(b"\x00") > len(data) // 100 + 1:
        ev.status = EvidenceStatus.ERROR
        ev.problems.append(f"{source} is binary data, not text")
        return ev
    _run(ev, iter([(0, data)]), Reader(data=data), len(data), last, task, engine)
    ev.held = data  # excerpts are cut from it after the pass (engine/excerpts.py)
    return ev


@cache
def _signature_matcher(engine: str | None) -> Matcher:
    sigs = signatures()
    return Matcher([s.pattern for s in sigs], engine=engine, gates=[s.gate for s in sigs])


def signature_scan(path: str | os.PathLike[str], engine: str | None = None) -> int:
    """Only the catalog's signatures over the file (matching lines, no evidence): the benchmark's baseline."""
    matcher = _signature_matcher(engine)
    return sum(len(matcher.find(chunk)) for _, chunk in logfile.iter_chunks(logfile.check_readable(path)))


def from_metrics(points: list[MetricPoint], *, source: str, task: Task | None = None) -> LogEvidence:
    """Evidence from a metric history (a tracker's), run through the same trajectory detectors."""
    ev = LogEvidence(source=source)
    last = points[-1] if points else None
    progress = ProgressPoint(source=source, line_no=last.line_no, step=last.step, epoch=last.epoch, time=last.time,
                             text=values_text(last.values, canonical_order=True)) if last else None
    nan = next((p for p in points if not all(math.isfinite(v) for v in p.values.values())), None)
    ev.trajectory = analyse(points, exact_nan=nan, last_progress=progress, task=task)
    return ev


def _another_attempts_end(line_no: int, fatal: list[int], tail: list[str], tail_start: int) -> bool:
    """The log's closing error record prints again the failure record of an earlier failure's line, with another
    message: a wrapper's 'Training failed: <why>' of a later attempt, what ended the run (batch 20's 1299)."""
    at = line_no - tail_start
    return line_no > max(fatal) and any(0 <= n - tail_start < at and tracebacks.failed_again(tail, n - tail_start, at) for n in fatal)


def _summary_readings(ev: LogEvidence, tail_lines: list[str], tail_start: int, name: str) -> None:
    """What the summary printed at a log's end says where the metric lines did not: scores at zero, every fp16 step
    skipped, W&B's run history."""
    if not any(a.kind is AnomalyKind.VALIDATION_METRIC_NEAR_ZERO for a in ev.trajectory.anomalies):
        zero = zeroscores.zero_scores(tail_lines, tail_start, name)
        # a result read from a summary, never over an ending: a kill or an exception after it ended the run
        if zero is not None and not any(h.line_no >= (zero.line_no or 0) and h.role is not Role.HINT for h in ev.hits) \
                and not any(t.line_no >= (zero.line_no or 0) for t in ev.tracebacks):
            ev.trajectory.anomalies.append(zero)
    if not any(a.kind is AnomalyKind.NAN_ONSET for a in ev.trajectory.anomalies) and \
            (skipped := skippedsteps.every_step_skipped(tail_lines, tail_start, name)) is not None:
        ev.trajectory.anomalies.append(skipped)
    # a quantity of the progress lines gone non-finite, where nothing else in the log names the NaN
    if not any(a.kind is AnomalyKind.NAN_ONSET for a in ev.trajectory.anomalies) and \
            not any(h.failure_class is FailureClass.NAN_INF for h in ev.hits) and \
            (gone := nanslots.went_nan(tail_lines, tail_start, name)) is not None:
        ev.trajectory.anomalies.append(gone)
    if not any(a.kind is AnomalyKind.TRAIN_VAL_DIVERGENCE for a in ev.trajectory.anomalies) and \
            (history := sparklines.wandb_history(tail_lines, tail_start, name)) is not None:
        ev.trajectory.anomalies.append(history)
    if not any(a.kind is AnomalyKind.LOSS_FROZEN for a in ev.trajectory.anomalies) and \
            (chance := sparklines.wandb_chance(tail_lines, tail_start, name)) is not None:
        ev.trajectory.anomalies.append(chance)


TRAINED_PAST = 3  # training losses logged after a completion message: a run (a new attempt, a next phase) went on past it


def _not_trained_past(completed_line: int | None, points: list[MetricPoint]) -> int | None:
    """A completion message the log trains past is not the run's end: a first run's 'Training complete.' and then a
    second, longer one appended to the same log, stopping at its epoch 53, is not completed."""
    if completed_line is None:
        return None
    later = sum(1 for p in points if p.line_no > completed_line and p.split != "eval" and "loss" in p.values)
    return None if later >= TRAINED_PAST else completed_line


def _ending(ev: LogEvidence, completed_line: int | None, points: list[MetricPoint], tail_lines: list[str], tail_start: int) -> None:
    """The run's end as the log shows it: a completion marker, or a stall (a live log gone quiet, a kill after silence)."""
    if completed_line is not None:
        ev.frameworks["completed-marker"] = completed_line
        return
    if ev.mtime is not None:
        check_stall(ev, points, tail_lines)
    stalled_before_kill(ev, points, tail_lines, tail_start)


def _run(ev: LogEvidence, chunks, reader: Reader, size: int, last: int, task: Task | None, engine: str | None,
         chunk_size: int = logfile.CHUNK, ranges: list[tuple[int, int, int]] | None = None,
         progress: Progress | None = None) -> dict[int, int]:
    """The pass, then what is read back after it. `ranges` (parallel.py): (first chunk number, start, end)
    byte ranges scanned in forked workers and merged, instead of walking `chunks`."""
    name = ev.source
    engine = _engine_for(size, engine)
    budget = None if size <= FULL_METRICS_BYTES else max(8, min(SAMPLED_METRICS_PER_CHUNK, SAMPLED_METRICS_TOTAL * chunk_size // size))
    _, sigs = _matcher(engine)
    newlines.use_vectors(size)
    if ranges is None:
        part = new_pass(name, size, budget, engine)
        for chunk_no, (offset, chunk) in enumerate(chunks):
            part.feed(chunk_no, offset, chunk, reader)
    else:
        from ml_skills.engine.read import parallel

        part = parallel.run(ranges, name, size, budget, engine, reader, chunk_size, progress)
    line_base, ends_with_newline = part.line_base, part.ends_with_newline
    ev.head = part.head
    aggs, tb_offsets, tb_total, completed_line, saved = part.aggs, part.tb_offsets, part.tb_total, part.completed_line, part.saved
    before_nan = part.before_nan
    points = [mp for _, mp in part.points]
    nan_point, grad_max, point_offsets, metric_offsets = part.nan_point, part.grad_max, part.point_offsets, part.metric_offsets()
    fw = part.fw

    ev.total_lines = line_base - 1 + (0 if ends_with_newline else 1)
    if before_nan is not None and before_nan not in saved:  # older than the newest saves, and the one to go back to
        saved = [before_nan, *saved]
    ev.saved_lines = [LogLine(source=name, line_no=n, text=redact(t)) for n, t in saved]
    ev.frameworks = fw.counts
    offsets: dict[int, int] = dict(point_offsets)
    offsets.update(tb_offsets)
    for idx, agg in sorted(aggs.items(), key=lambda t: t[1].first[0][0]):
        sig = sigs[idx]
        kept = list(agg.first)
        if agg.last and agg.last[0] not in [f[0] for f in agg.first]:
            kept.append(agg.last)
        for line_no, off, text in kept:
            offsets[line_no] = off
            ev.hits.append(SignatureHit(
                signature_id=sig.id, failure_class=sig.failure_class, role=sig.role, severity=sig.severity,
                source=name, line_no=line_no, text=redact(text), count=agg.count,
                last_line_no=agg.last[0] if agg.last else None,
            ))
    ev.hits.sort(key=lambda h: h.line_no)
    ev.tracebacks = tracebacks.read_all(reader, name, tb_offsets)
    headless = tracebacks.read_headless(reader, name)
    if headless is not None and all(t.line_no != headless.line_no for t in ev.tracebacks):
        ev.tracebacks.insert(0, headless)
    tail_lines, tail_cut = reader.tail(last)
    tail_start = ev.total_lines - len(tail_lines) + 1
    ev.tail = Excerpt(source=name, start_line=tail_start, lines=redact_lines(tail_lines), truncated=tail_cut)
    fatal = [h.line_no for h in ev.hits if h.role is not Role.HINT]
    if (bare := tracebacks.bare_exception(tail_lines, tail_start, name, ev.tracebacks)) is not None and (
            not fatal or _another_attempts_end(bare.line_no, fatal, tail_lines, tail_start)):
        ev.tracebacks.append(bare)  # a log that ends on an exception line alone, and nothing else names a failure
    reached = last_progress(name, points, tail_lines, tail_start)
    ev.trajectory = analyse(points, exact_nan=nan_point, exact_grad_max=grad_max, last_progress=reached, task=task)
    _summary_readings(ev, tail_lines, tail_start, name)
    valsize.drop_perfect_on_tiny_validation(ev)
    if (same := evalsource.eval_on_training_data(ev)) is not None:
        ev.trajectory.anomalies.append(same)
    quote_anomaly_lines(ev, reader, {**metric_offsets, **point_offsets})
    completed_line = _not_trained_past(completed_line, points)
    if completed_line is None:  # no message, but the run's own shape says it reached its end
        completed_line = completion.run_end(tail_lines, tail_start, reached.line_no if reached else None, points) \
            or schedule.schedule_ended(points)
    _ending(ev, completed_line, points, tail_lines, tail_start)
    if tb_total > len(tb_offsets):
        ev.problems.append(f"{tb_total} tracebacks in the log; the first {TRACEBACKS_KEPT // 2} and the last {len(tb_offsets) - TRACEBACKS_KEPT // 2} were parsed")
    if budget is not None:
        ev.problems.append(
            f"metrics sampled: the log is {size / 2**20:.0f} MiB, so {budget} metric lines per "
            "4 MiB chunk were parsed (the first NaN line and the largest grad-norm line are always exact, and sparse "
            "validation-metric lines are all parsed)"
        )
    return offsets
