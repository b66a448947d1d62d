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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from ml_skills.catalog.loader import signatures
from ml_skills.collectors import logfile
from ml_skills.engine import completion, frameworks, gradmax, metric_lines, newlines, tracebacks, zeroscores
from ml_skills.engine import metrics as metric_parser
from ml_skills.engine.excerpts import Reader, quote_anomaly_lines, remember_offsets, remember_text
from ml_skills.engine.lastprogress import check_stall, last_progress
from ml_skills.engine.matcher import Matcher
from ml_skills.engine.points import values_text
from ml_skills.engine.trajectories import analyse
from ml_skills.models import (
    AnomalyKind,
    EvidenceStatus,
    Excerpt,
    LogEvidence,
    LogLine,
    MetricPoint,
    ProgressPoint,
    Role,
    Signature,
    SignatureHit,
    Task,
)
from ml_skills.render.progress import Progress
from ml_skills.safety.redact import redact

FULL_METRICS_BYTES = 2 * 1024 * 1024  # above this, sampled: parsing every line costs about 1 s per 10k lines
SAMPLED_METRICS_PER_CHUNK = 48  # at most; fewer on longer logs so about SAMPLED_METRICS_TOTAL are parsed
SAMPLED_METRICS_TOTAL = 2048
HITS_KEPT_PER_SIGNATURE = 3
TRACEBACKS_KEPT = 40
MAX_POINTS_KEPT = 50_000

# Internal markers: (name, pattern, report once per chunk)
_MARKERS: list[tuple[str, str, bool]] = [
    # Hydra's instantiate error without HYDRA_FULL_ERROR is its own short traceback (tracebacks.parse_hydra)
    ("traceback", r"(Original )?Traceback \(most recent call last\):|^(\[rank\d+\]:\s*)?Error in call to target '[\w.]+':\s*$", False),
    ("completed", (r"(?i)(training (completed|finished|complete|done)\b|'train_runtime'|\"train_runtime\"|`Trainer\.fit` stopped: `max_(epochs|steps)=\d+` reached|Training complete in|finished training|saving final model|Done training|training_done|"
     # the process's own runner saying it ended well: an IDE, LSF's job report, SLURM's sacct, HF's closing metrics block
     r"Process finished with exit code 0\b|^Successfully completed\.|\bState: COMPLETED\b|\*{5} train metrics \*{5})"), True),
    # a validation metric in the chunk: on sampled logs its lines are all parsed (see _eval_lines)
    ("eval", metric_lines.EVAL, True),
    # a checkpoint written: resume points for the plan (engine/facts.py reads the last few)
    ("saved", (r"(?i)(saving (model )?checkpoint|saved? (a |the )?(model )?checkpoint|checkpoint (was )?saved|saving (the )?(best )?model (to|at|weights)|"
              r"model (weights )?saved (to|at|in)|saving model to|saved model to|saving current state to|saving weights to)"), False),
]
HEAD_LINES = 300  # the first lines, where runs print their configuration (engine/facts.py)
HEAD_BYTES = 64 * 1024
SAVED_KEPT = 5

@dataclass
class _SigAgg:
    first: list[tuple[int, int, str]] = field(default_factory=list)  # (line_no, byte offset, text)
    last: tuple[int, int, str] | None = None
    count: int = 0


# Below this size a process that has not compiled the Hyperscan database yet scans with `re`:
# compiling it takes about 0.9 s, `re` reads a 1 KB log in 0.02 s and a 24 KB one in 0.2 s. A
# one-shot CLI run on a pasted traceback or a short log answers in a third of the time; a running
# MCP server, once compiled, keeps using Hyperscan. Both engines find the same matches (tested).
SMALL_LOG_BYTES = 32 * 1024
_compiled: set[str | None] = set()


def _engine_for(size: int, engine: str | None) -> str | None:
    if engine is not None or size >= SMALL_LOG_BYTES or None in _compiled or "hyperscan" in _compiled:
        return engine
    return "re"


@cache
def _matcher(engine: str | None = None) -> tuple[Matcher, tuple[Signature, ...]]:
    """The catalog's signatures, then the markers."""
    _compiled.add(engine)
    sigs = signatures()
    patterns = [s.pattern for s in sigs] + [p for _, p, _ in _MARKERS]
    single = [False] * len(sigs) + [s for _, _, s in _MARKERS]
    return Matcher(patterns, single=single, engine=engine, gates=[s.gate for s in sigs]), sigs


def warm_cache() -> int:
    """Build every pattern database a scan uses, so that they are in the on-disk cache; how many matchers."""
    _matcher(None)
    _signature_matcher(None)
    frameworks._matcher(None)
    metric_lines._eval_matcher(None)
    from ml_skills.engine import facts

    facts._prefilter()
    return 5


def scan_log(
    path: str | os.PathLike[str],
    *,
    source: str | None = None,
    last: int = 500,
    task: Task | None = None,
    engine: str | None = None,
    progress: Progress | None = None,
) -> LogEvidence:
    """Scan a whole log once and return what it holds. Raises InputError for unusable files.

    `progress` (render/progress.py) is told the bytes read after each chunk; the scan never prints.
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
    chunks = logfile.iter_chunks(p, limit=st.st_size)
    if progress is not None:
        chunks = _reporting(chunks, f"scanning {p.name}", st.st_size, progress)
    offsets = _run(ev, chunks, Reader(path=p, end=st.st_size), st.st_size, last, task, engine)
    remember_offsets(name, st.st_ino, offsets)
    _flag_if_changed(ev, p, st)
    return ev


def _reporting(chunks: Iterator[tuple[int, bytearray]], what: str, size: int, progress: Progress) -> Iterator[tuple[int, bytearray]]:
    """Pass the chunks through, telling `progress` how far the pass has got."""
    for offset, chunk in chunks:
        yield offset, chunk
        progress(what, offset + len(chunk), size, "B")


def _flag_if_changed(ev: LogEvidence, p: Path, before: os.stat_result) -> None:
    """A log that grew, was truncated or was replaced (rotated) during the pass is flagged, not trusted whole."""
    try:
        after = p.stat()
        same = (after.st_ino, after.st_dev, after.st_size, after.st_mtime_ns) == (
            before.st_ino, before.st_dev, before.st_size, before.st_mtime_ns)
    except OSError:
        same = False
    if not same:
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
    remember_text(source, data)
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


def _head(name: str, chunk: bytes | bytearray) -> Excerpt:
    """The log's first lines (at most HEAD_LINES, HEAD_BYTES), where runs print their configuration."""
    lines = bytes(chunk[:HEAD_BYTES]).split(b"\n")
    cut = len(chunk) > HEAD_BYTES
    if cut or not lines[-1]:
        lines = lines[:-1]  # half a line, or the empty piece after the last newline
    return Excerpt(source=name, start_line=1, lines=[redact(logfile.decode(x)) for x in lines[:HEAD_LINES]],
                   truncated=cut or len(lines) > HEAD_LINES)


def _run(ev: LogEvidence, chunks, reader: Reader, size: int, last: int, task: Task | None, engine: str | None) -> dict[int, int]:
    name = ev.source
    engine = _engine_for(size, engine)
    budget = None if size <= FULL_METRICS_BYTES else max(8, min(SAMPLED_METRICS_PER_CHUNK, SAMPLED_METRICS_TOTAL * logfile.CHUNK // size))
    matcher, sigs = _matcher(engine)
    newlines.use_vectors(size)
    n_sigs = len(sigs)
    grad_record: gradmax.Record | None = None  # sampled logs: the exact largest grad norm so far
    point_offsets: dict[int, int] = {}  # line -> byte offset of the exact events, for excerpts
    aggs: dict[int, _SigAgg] = {}
    tb_offsets: list[tuple[int, int]] = []  # (line_no, byte offset)
    tb_total = 0
    completed_line: int | None = None
    saved: list[tuple[int, str]] = []  # (line_no, text) of the newest checkpoint-saved lines
    points: list[MetricPoint] = []
    metric_offsets: dict[int, int] = {}  # line_no -> byte offset, to quote an anomaly's own line
    nan_point: MetricPoint | None = None
    grad_max: MetricPoint | None = None
    line_base = 1  # line number of the chunk's first line
    nan_sigs = {i for i, s in enumerate(sigs) if s.id in ("loss-value-nan", "grad-norm-nonfinite")}
    huge_gn = {i for i, s in enumerate(sigs) if s.id == "grad-norm-huge"}
    ends_with_newline = True

    fw = frameworks.Tally(engine)
    for chunk_no, (offset, chunk) in enumerate(chunks):
        if chunk_no == 0:
            ev.head = _head(name, chunk)
        cursor, cursor_line = 0, line_base
        continued = chunk_no > 0 and not ends_with_newline  # a line longer than a chunk: this chunk starts mid-line
        exact_lines: set[int] = set()
        eval_in_chunk = False
        tb_before = tb_total
        # matches come sorted by end offset, so all the matches of one line are consecutive: its bounds and
        # text are found once per line, not once per match (a long line repeating a signature made that quadratic)
        start, stop, line_text = 0, -1, ""
        for idx, end in matcher.find(chunk):
            if not start <= end - 1 <= stop:
                start, stop = metric_lines.line_bounds(chunk, end)
                line_text = ""
            if start < cursor:  # matches come in order of end offset; rewind the count if needed
                cursor, cursor_line = 0, line_base
            cursor_line += newlines.count(chunk, cursor, start)
            cursor = start
            line_no = cursor_line
            if idx < n_sigs:
                agg = aggs.setdefault(idx, _SigAgg())
                if agg.last is not None and agg.last[0] == line_no:
                    continue  # same line matched twice
                agg.count += 1
                line_text = line_text or (logfile.decode_cut(reader.read(max(0, offset - logfile.CUT_CONTEXT), min(offset, logfile.CUT_CONTEXT)),
                                                             chunk[start:stop]) if continued and start == 0 else logfile.decode(chunk[start:stop]))
                if len(agg.first) < HITS_KEPT_PER_SIGNATURE:
                    agg.first.append((line_no, offset + start, line_text))
                agg.last = (line_no, offset + start, line_text)
                if idx in nan_sigs or idx in huge_gn:
                    exact_lines.add(start)
                continue
            marker = _MARKERS[idx - n_sigs][0]
            if marker == "traceback":
                if tb_offsets and tb_offsets[-1][0] == line_no:
                    continue  # one traceback per line: a line repeating the header starts one traceback
                tb_total += 1
                tb_offsets.append((line_no, offset + start))
                if len(tb_offsets) > TRACEBACKS_KEPT:
                    del tb_offsets[TRACEBACKS_KEPT // 2]  # keep the first half and the newest
            elif marker == "completed":
                completed_line = line_no
            elif marker == "eval":
                eval_in_chunk = True
            elif marker == "saved" and (not saved or saved[-1][0] != line_no):
                saved = [*saved[-(SAVED_KEPT - 1):], (line_no, logfile.decode(chunk[start:stop])[:400])]
        fw.read(chunk, chunk_no, last=offset + len(chunk) >= size, traceback=tb_total > tb_before)

        # metrics: every loss line on small logs, an even sample on huge ones, plus exact events
        starts = metric_lines.loss_lines(chunk, budget)
        if budget is None:
            starts = sorted(set(starts) | metric_lines.accuracy_lines(chunk))
        if budget is not None and eval_in_chunk:
            exact_lines |= metric_lines.eval_lines(chunk, engine)
        if exact_lines:
            starts = sorted(set(starts) | exact_lines)
        mcursor, mline = 0, line_base
        for s in starts:
            mline += newlines.count(chunk, mcursor, s)
            mcursor = s
            e = chunk.find(b"\n", s)
            raw = chunk[s : (len(chunk) if e < 0 else e)]
            text = raw.decode("utf-8", errors="replace")
            parsed = metric_parser.parse_line(text)
            if parsed is None:
                continue
            values, step, epoch = parsed
            batch = batches = None
            if (ei := metric_parser.epoch_iteration(text)) is not None:
                epoch, batch, batches = ei
            elif epoch is None and (bar := metric_parser.KERAS_BAR.match(text)) is not None:
                batch, batches = float(bar["i"]), float(bar["n"])
                head = None  # the epoch is on its own header line above the bar ('Epoch 8/100')
                for head in metric_parser.KERAS_EPOCH.finditer(chunk, max(0, s - 65536), s):
                    pass
                epoch = float(head["e"]) if head is not None else None
            mp = MetricPoint(source=name, line_no=mline, step=step, epoch=epoch, values=values,
                             split="eval" if all(k.startswith("val_") for k in values) else "train",
                             time=metric_parser.parse_timestamp(text[:200]), rank=metric_lines.rank_of(text),
                             batch=batch, batches=batches)
            if nan_point is None and not all(math.isfinite(v) for v in values.values()):
                nan_point = mp
                point_offsets[mline] = offset + s
            gn = values.get("grad_norm")
            # the largest finite norm: an inf norm is the NaN onset's (kept above), not a spike to compare
            if gn is not None and math.isfinite(gn) and (grad_record is None or gn > grad_record.value):
                grad_max = mp
                grad_record = gradmax.Record(value=gn, offset=offset + s)
                point_offsets[mline] = offset + s
            if len(points) >= MAX_POINTS_KEPT:
                points = points[::2]  # thin evenly; the extremes are kept separately above
                keep = {p.line_no for p in points} | {p.line_no for p in (nan_point, grad_max) if p is not None}
                metric_offsets = {k: v for k, v in metric_offsets.items() if k in keep}
            points.append(mp)
            metric_offsets[mline] = offset + s
        if budget is not None:  # sampling can step over a grad-norm spike: find the largest exactly
            record = gradmax.scan_chunk(chunk, offset, grad_record, engine)
            if record is not grad_record and record is not None and record.raw is not None:
                grad_record = record
                line_no = line_base + newlines.count(chunk, 0, record.offset - offset)
                grad_max = _grad_point(name, record, line_no)
                point_offsets[line_no] = record.offset
        line_base = mline + newlines.count(chunk, mcursor)  # the metric loop already counted up to mcursor
        ends_with_newline = chunk.endswith(b"\n")

    ev.total_lines = line_base - 1 + (0 if ends_with_newline else 1)
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
    ev.tail = Excerpt(source=name, start_line=tail_start, lines=[redact(x) for x in tail_lines], truncated=tail_cut)
    progress = last_progress(name, points, tail_lines, tail_start)
    ev.trajectory = analyse(points, exact_nan=nan_point, exact_grad_max=grad_max, last_progress=progress, task=task)
    if not any(a.kind is AnomalyKind.VALIDATION_METRIC_NEAR_ZERO for a in ev.trajectory.anomalies):
        zero = zeroscores.zero_scores(tail_lines, tail_start, name)
        # a result read from a summary, never over an ending: a kill or an exception after it ended the run
        if zero is not None and not any(h.line_no >= (zero.line_no or 0) and h.role is not Role.HINT for h in ev.hits) \
                and not any(t.line_no >= (zero.line_no or 0) for t in ev.tracebacks):
            ev.trajectory.anomalies.append(zero)
    quote_anomaly_lines(ev, reader, {**metric_offsets, **point_offsets})
    if completed_line is None:  # no message, but the run's own counter reached its configured total
        completed_line = completion.final_counter(tail_lines, tail_start, progress.line_no if progress else None)
    if completed_line is None:  # or a summary of the whole run printed after its last step
        completed_line = completion.summary_after_training(tail_lines, tail_start, progress.line_no if progress else None)
    if completed_line is not None:
        ev.frameworks["completed-marker"] = completed_line
    elif ev.mtime is not None:
        check_stall(ev, points, tail_lines)
    if tb_total > len(tb_offsets):
        ev.problems.append(f"{tb_total} tracebacks in the log; the first {TRACEBACKS_KEPT // 2} and the last {len(tb_offsets) - TRACEBACKS_KEPT // 2} were parsed")
    if budget is not None:
        ev.problems.append(
            f"metrics sampled: the log is {size / 2**20:.0f} MiB, so {budget} metric lines per "
            "4 MiB chunk were parsed (the first NaN line and the largest grad-norm line are always exact, and sparse "
            "validation-metric lines are all parsed)"
        )
    return offsets


def _grad_point(name: str, record: gradmax.Record, line_no: int) -> MetricPoint:
    """The metric point of a grad-norm record found by the scan (its line was not among the samples)."""
    raw = record.raw or b""
    parsed = metric_parser.parse_line(raw.decode("utf-8", errors="replace"))
    values, step, epoch = parsed if parsed else ({}, None, None)
    values = {**values, "grad_norm": values.get("grad_norm", record.value)}
    return MetricPoint(source=name, line_no=line_no, step=step, epoch=epoch, values=values,
                       time=metric_parser.parse_timestamp(raw[:200].decode("utf-8", errors="replace")))


def is_terminal_role(role: Role) -> bool:
    return role is Role.CAUSE
