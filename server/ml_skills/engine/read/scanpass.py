"""The per-chunk work of a log pass, as a state that can be split over byte ranges and merged.

`Pass.feed` is one chunk of scan.py's pass: signatures and markers, tracebacks, metric lines,
the grad-norm record, framework markers. Line numbers inside a Pass count from its own first
line, so a Pass over a later range of the log can run before the ranges ahead of it are read
(in another process: scan.py's parallel path) and be shifted when merged. `merge` makes two
consecutive Passes into the one Pass a single walk over both ranges would have made: same hits
and counts, same first and newest tracebacks, same metric points, same first NaN and largest grad
norm (tests/engine/test_parallel_scan.py checks it on every corpus log and a benchmark log).

What makes that possible: each chunk is the same chunk in both (chunk_starts gives a worker the
boundaries a pass from byte 0 would cut), and everything kept across chunks is either
order-free (counts, the first/newest few, the earliest largest value) or kept by a rule that
composes: metric points beyond MAX_POINTS are thinned to the first point per byte bucket, a bucket
that doubles as needed, so thinning two halves and then their join gives what thinning the whole
gives.
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from operator import methodcaller

from ml_skills.collectors import logfile
from ml_skills.engine.read import counters, frameworks, gradmax, metric_lines, metric_shapes, newlines
from ml_skills.engine.read import metrics as metric_parser
from ml_skills.engine.read.excerpts import Reader
from ml_skills.engine.read.matcher import Matcher
from ml_skills.lazyre import lazy
from ml_skills.models import Excerpt, MetricPoint, Signature
from ml_skills.safety.redact import redact_lines

# a line that names either ending ('[ASYNC MAIN] Training completed or interrupted', verl's) says neither
_EITHER_END = lazy(rb"(?i)\b(?:completed?|finished|done) or (?:interrupted|failed|stopped|killed|aborted|crashed)\b")


_SUMMARY_BLOCK = b" metrics *****"
"""The header of Hugging Face's `log_metrics` block ('***** train metrics *****'), whose `train_loss` is the run's mean."""
HITS_KEPT_PER_SIGNATURE = 3
TRACEBACKS_KEPT = 40
MAX_POINTS_KEPT = 50_000
SAVED_KEPT = 5
# a save's first line says it is saving; its second (if any) that it saved: two lines that both start a save (four
# hosts each 'Saving checkpoint for step 1104000', corpus 1784) are four saves, never joined in pairs
_SAVING = lazy(r"(?i)\bsaving\b")


def _continues(first: str, line: str) -> bool:
    """`line` is the second line of the save `first` began: a completion after a start not yet joined."""
    return " | " not in first and _SAVING.search(first) is not None and _SAVING.search(line) is None


HEAD_LINES = 300  # the first lines, where runs print their configuration (engine/facts.py)
HEAD_BYTES = 64 * 1024


@dataclass
class SigAgg:
    first: list[tuple[int, int, str]] = field(default_factory=list)  # (line_no, byte offset, text)
    last: tuple[int, int, str] | None = None
    count: int = 0


def _shift3(t: tuple[int, int, str], k: int) -> tuple[int, int, str]:
    return (t[0] + k, t[1], t[2])


_is_val = methodcaller("startswith", "val_")


def thin(points: list[tuple[int, MetricPoint]], bucket: int) -> list[tuple[int, MetricPoint]]:
    """The first point of each `bucket`-byte stretch of the log (points sorted by byte offset)."""
    out: list[tuple[int, MetricPoint]] = []
    for p in points:
        if not out or p[0] // bucket != out[-1][0] // bucket:
            out.append(p)
    return out


class Pass:
    """What one walk over consecutive chunks found; a worker sends it back as JSON (to_wire)."""

    def __init__(self, name: str, size: int, budget: int | None, engine: str | None, matcher: Matcher,
                 sigs: tuple[Signature, ...], markers: list[tuple[str, str, bool]], continued: bool = False):
        self.name, self.size, self.budget, self.engine = name, size, budget, engine
        self.matcher: Matcher | None = matcher
        self.n_sigs = len(sigs)
        self.markers = [m[0] for m in markers]
        self.nan_sigs = {i for i, s in enumerate(sigs) if s.id in ("loss-value-nan", "grad-norm-nonfinite")}
        self.huge_gn = {i for i, s in enumerate(sigs) if s.id == "grad-norm-huge"}
        self.line_base = 1  # line number (from this pass's first line) of the next chunk's first line
        self.ends_with_newline = not continued
        self.head: Excerpt | None = None
        self.aggs: dict[int, SigAgg] = {}
        self.tb_offsets: list[tuple[int, int]] = []  # (line_no, byte offset): the first half and the newest
        self.tb_total = 0
        self.completed_line: int | None = None
        self.saved: list[tuple[int, str]] = []
        self.before_nan: tuple[int, str] | None = None  # the last save before the first non-finite value: the last good checkpoint
        self.nan_seen = False
        self.points: list[tuple[int, MetricPoint]] = []  # (byte offset, point), thinned by `bucket`
        self.bucket = 1
        self.nan_point: MetricPoint | None = None
        self.nan_offset = 0
        self.grad_record: gradmax.Record | None = None  # sampled logs: the exact largest grad norm so far
        self.grad_max: MetricPoint | None = None
        self.point_offsets: dict[int, int] = {}  # line -> byte offset of the exact events, for excerpts
        self.fw = frameworks.Tally(engine)

    def to_wire(self) -> bytes:
        """This Pass as JSON (a worker's answer): plain data, so the parent never unpickles anything."""
        def mp(p: MetricPoint | None) -> dict | None:
            if p is None:
                return None
            d = p.model_dump()
            d["time"] = d["time"].isoformat() if d["time"] is not None else None
            return d
        g = self.grad_record
        return json.dumps({
            "line_base": self.line_base, "ends_with_newline": self.ends_with_newline,
            "aggs": {str(i): [a.first, a.last, a.count] for i, a in self.aggs.items()},
            "tb_offsets": self.tb_offsets, "tb_total": self.tb_total, "completed_line": self.completed_line,
            "saved": self.saved, "before_nan": self.before_nan, "nan_seen": self.nan_seen, "points": [[o, mp(p)] for o, p in self.points], "bucket": self.bucket,
            "nan_point": mp(self.nan_point), "nan_offset": self.nan_offset, "grad_max": mp(self.grad_max),
            "grad_record": None if g is None else [g.value, g.offset, None if g.raw is None else g.raw.decode("latin-1")],
            "point_offsets": [[k, v] for k, v in self.point_offsets.items()],
            "fw_events": self.fw._events, "fw_traceback_chunks": self.fw._traceback_chunks,
        }).encode()

    def from_wire(self, data: bytes) -> Pass:
        """A worker's Pass read back, with this (empty) Pass's settings."""
        d = json.loads(data)

        def mp(x: dict | None) -> MetricPoint | None:
            if x is None:
                return None
            if x["time"] is not None:
                x["time"] = datetime.fromisoformat(x["time"])
            return MetricPoint(**x)
        t3 = lambda x: (x[0], x[1], x[2])
        out = Pass.__new__(Pass)
        out.__dict__.update(self.__dict__)
        out.matcher, out.head = None, None
        out.line_base, out.ends_with_newline = d["line_base"], d["ends_with_newline"]
        out.aggs = {int(i): SigAgg(first=[t3(x) for x in f], last=t3(last) if last else None, count=c) for i, (f, last, c) in d["aggs"].items()}
        out.tb_offsets = [(n, o) for n, o in d["tb_offsets"]]
        out.tb_total, out.completed_line = d["tb_total"], d["completed_line"]
        out.saved = [(n, t) for n, t in d["saved"]]
        out.before_nan = (d["before_nan"][0], d["before_nan"][1]) if d["before_nan"] else None
        out.nan_seen = d["nan_seen"]
        out.points = [(o, mp(p)) for o, p in d["points"]]  # type: ignore[misc]
        out.bucket, out.nan_point, out.nan_offset, out.grad_max = d["bucket"], mp(d["nan_point"]), d["nan_offset"], mp(d["grad_max"])
        g = d["grad_record"]
        out.grad_record = None if g is None else gradmax.Record(value=g[0], offset=g[1], raw=None if g[2] is None else g[2].encode("latin-1"))
        out.point_offsets = {k: v for k, v in d["point_offsets"]}
        out.fw = frameworks.Tally(self.engine)
        out.fw._events = [(a, b, c) for a, b, c in d["fw_events"]]
        out.fw._traceback_chunks = d["fw_traceback_chunks"]
        return out

    @property
    def lines(self) -> int:
        """Newlines read so far."""
        return self.line_base - 1

    def feed(self, chunk_no: int, offset: int, chunk: bytearray, reader: Reader) -> None:
        """One chunk of the pass: its signature and marker hits, its framework markers, its metric points."""
        if chunk_no == 0:
            self.head = _head(self.name, chunk)
        tb_before = self.tb_total
        known, exact_lines, eval_in_chunk = self._read_matches(offset, chunk, reader)
        self.fw.read(chunk, chunk_no, last=offset + len(chunk) >= self.size, traceback=self.tb_total > tb_before)
        starts, rows = self._metric_lines(chunk, exact_lines, eval_in_chunk)
        counted: list[tuple[int, int]] = []
        mcursor, mline = self._read_metrics(offset, chunk, starts, rows, known, counted)
        if self.budget is not None:  # sampling can step over a grad-norm spike: find the largest exactly
            self._exact_grad_max(offset, chunk, sorted(known + counted))
        if known[-1][0] > mcursor:
            mcursor, mline = known[-1]
        self.line_base = mline + newlines.count(chunk, mcursor)  # counted up to mcursor already
        self.ends_with_newline = chunk.endswith(b"\n")

    def _read_matches(self, offset: int, chunk: bytearray, reader: Reader) -> tuple[list[tuple[int, int]], set[int], bool]:
        """Record the chunk's signature hits and markers (tracebacks, completion, evaluation, saves).

        Returns the (offset, line number) pairs counted on the way, increasing; the starts of lines whose exact
        metric values matter (a NaN, a huge grad norm); whether an evaluation marker was in the chunk."""
        assert self.matcher is not None
        line_base, n_sigs = self.line_base, self.n_sigs
        cursor, cursor_line = 0, line_base
        known: list[tuple[int, int]] = [(0, line_base)]  # (offset, line number) counted so far, increasing
        continued = not self.ends_with_newline  # a line longer than a chunk: this chunk starts mid-line
        exact_lines: set[int] = set()
        eval_in_chunk = False
        # matches come sorted by end offset, so all the matches of one line are consecutive: its bounds and
        # text are found once per line, not once per match (a long line repeating a signature made that quadratic)
        start, stop, line_text = 0, -1, ""
        for idx, end in self.matcher.find(chunk):
            if not start <= end - 1 <= stop:
                start, stop = metric_lines.line_bounds(chunk, end)
                line_text = ""
            if start < cursor:  # matches come in order of end offset; rewind the count if needed
                cursor, cursor_line = 0, line_base
            cursor_line += newlines.count(chunk, cursor, start)
            cursor = start
            line_no = cursor_line
            if start > known[-1][0]:
                known.append((start, line_no))
            if idx < n_sigs:
                agg = self.aggs.setdefault(idx, SigAgg())
                if agg.last is not None and agg.last[0] == line_no:
                    continue  # same line matched twice
                agg.count += 1
                line_text = line_text or (logfile.decode_cut(reader.read(max(0, offset - logfile.CUT_CONTEXT), min(offset, logfile.CUT_CONTEXT)),
                                                             chunk[start:stop]) if continued and start == 0 else logfile.decode(chunk[start:stop]))
                if len(agg.first) < HITS_KEPT_PER_SIGNATURE:
                    agg.first.append((line_no, offset + start, line_text))
                agg.last = (line_no, offset + start, line_text)
                if idx in self.nan_sigs or idx in self.huge_gn:
                    exact_lines.add(start)
                if idx in self.nan_sigs and not self.nan_seen:
                    self.nan_seen, self.before_nan = True, (self.saved[-1] if self.saved else None)
                continue
            marker = self.markers[idx - n_sigs]
            if marker == "traceback":
                if self.tb_offsets and self.tb_offsets[-1][0] == line_no:
                    continue  # one traceback per line: a line repeating the header starts one traceback
                self.tb_total += 1
                self.tb_offsets.append((line_no, offset + start))
                if len(self.tb_offsets) > TRACEBACKS_KEPT:
                    del self.tb_offsets[TRACEBACKS_KEPT // 2]  # keep the first half and the newest
            elif marker == "completed" and not _EITHER_END.search(chunk, start, stop):
                self.completed_line = line_no
            elif marker == "eval":
                eval_in_chunk = True
            elif marker == "saved" and self.saved and self.saved[-1][0] == line_no - 1 \
                    and _continues(self.saved[-1][1], line := logfile.decode(chunk[start:stop])):
                # one save told on two lines ('Saving model checkpoint to out/checkpoint-8000.pt', then 'checkpoint saved
                # (548612 bytes)'): one entry, at its first line, so the kept saves are saves, not halves of them
                n, text = self.saved[-1]
                self.saved[-1] = (n, (text + " | " + line)[:400])
            elif marker == "saved" and (not self.saved or self.saved[-1][0] != line_no):
                self.saved = [*self.saved[-(SAVED_KEPT - 1):], (line_no, logfile.decode(chunk[start:stop])[:400])]
        return known, exact_lines, eval_in_chunk

    def _metric_lines(self, chunk: bytearray, exact_lines: set[int], eval_in_chunk: bool) -> tuple[list[int], dict[int, metric_lines.Row]]:
        """The starts of the metric lines to read, sorted, and the rows of metric tables already parsed.

        Every loss line on small logs, an even sample on huge ones, plus the exact events."""
        budget = self.budget
        starts = metric_lines.loss_lines(chunk, budget)
        rows, drop = metric_lines.block_rows(chunk, starts)  # a key-value block is one point (engine/read/kvblocks.py)
        if drop or rows:
            starts = sorted((set(starts) - drop) | rows.keys())
        if budget is None:  # and the rows of metric tables whose header is one of those lines (engine/tables.py)
            rows |= metric_lines.table_rows(chunk, starts)
            starts = sorted(set(starts) | metric_lines.accuracy_lines(chunk) | rows.keys())
        if budget is not None and eval_in_chunk:
            exact_lines |= metric_lines.eval_lines(chunk, self.engine)
        if exact_lines:
            starts = sorted(set(starts) | exact_lines)
        return starts, rows

    def _read_metrics(self, offset: int, chunk: bytearray, starts: list[int], rows: dict[int, metric_lines.Row],
                      known: list[tuple[int, int]], counted: list[tuple[int, int]]) -> tuple[int, int]:
        """Parse the metric lines into points: keep the first non-finite one, the largest grad norm, a thinned series.

        Returns the last (offset, line number) counted, to count the rest of the chunk's lines from; adds every line
        start it counted to `counted`, as (offset, line number)."""
        name = self.name
        # line numbers of the metric lines: counted on from the nearest offset the match loop already counted,
        # so each newline of the chunk is counted about once (counting is a fifth of a big log's scan)
        mcursor, mline, k = 0, self.line_base, 0
        heads = counters.EpochHeads(chunk)
        for s in starts:
            while k < len(known) and known[k][0] <= s:
                k += 1
            if known[k - 1][0] > mcursor:
                mcursor, mline = known[k - 1]
            mline += newlines.count(chunk, mcursor, s)
            mcursor = s
            counted.append((s, mline))
            e = chunk.find(b"\n", s)
            raw = chunk[s : (len(chunk) if e < 0 else e)]
            text = raw.decode("utf-8", errors="replace")
            memo = metric_shapes.shape_memo(metric_shapes.shape_of(raw))
            parsed = rows[s] if s in rows else metric_parser.parse_line(text, memo)
            if parsed is None:
                continue
            values, step, epoch = parsed
            if "loss" in values and ("train_runtime" in text or ("train_loss" in text and _SUMMARY_BLOCK in chunk[max(0, s - 2000) : s])):
                # Hugging Face's final metrics ({'train_runtime': ..., 'train_loss': 0.15}, or its log_metrics block
                # '***** train metrics *****' / '  train_loss  =  0.15', PaddleNLP's too): the whole run's mean loss
                values = {k: v for k, v in values.items() if k != "loss"}
                if not values:
                    continue
            batch = batches = None
            if (ei := counters.epoch_iteration(text, memo)) is not None:
                epoch, batch, batches = ei
                step = None if step == batch else step  # 'Epoch 10 ; Iter 50/213': the epoch's iteration, no global step
            elif epoch is None and (bar := counters.KERAS_BAR.match(text)) is not None:
                batch, batches = float(bar["i"]), float(bar["n"])
            if epoch is None:
                epoch = heads.above(s)  # the epoch is on its own header line above ('Epoch 8/100', '[Epoch 1/20]')
            mp = metric_point(source=name, line_no=mline, step=step, epoch=epoch, values=values,
                              split="eval" if all(map(_is_val, values)) else "train",
                              time=metric_parser.parse_timestamp(text[:200]), rank=metric_lines.rank_of(text, memo),
                              batch=batch, batches=batches)
            if self.nan_point is None and not all(map(math.isfinite, values.values())):
                self.nan_point, self.nan_offset = mp, offset + s
                self.point_offsets[mline] = offset + s
            gn = values.get("grad_norm")
            # the largest finite norm: an inf norm is the NaN onset's (kept above), not a spike to compare
            if gn is not None and math.isfinite(gn) and (self.grad_record is None or gn > self.grad_record.value):
                self.grad_max = mp
                self.grad_record = gradmax.Record(value=gn, offset=offset + s)
                self.point_offsets[mline] = offset + s
            self._add_point(offset + s, mp)
        return mcursor, mline

    def _exact_grad_max(self, offset: int, chunk: bytearray, counted: list[tuple[int, int]]) -> None:
        """A sampled log's largest grad norm, found exactly in the chunk (the samples may have stepped over it).
        `counted`: (offset in the chunk, line number) of the line starts the pass counted, increasing."""
        record = gradmax.scan_chunk(chunk, offset, self.grad_record, self.engine)
        if record is not self.grad_record and record is not None and record.raw is not None:
            self.grad_record = record
            line_no = line_at(chunk, counted, record.offset - offset)
            self.grad_max = grad_point(self.name, record, line_no)
            self.point_offsets[line_no] = record.offset

    def _add_point(self, offset: int, mp: MetricPoint) -> None:
        if self.points and offset // self.bucket == self.points[-1][0] // self.bucket:
            return  # thinned: this stretch of the log already has its point
        self.points.append((offset, mp))
        while len(self.points) > MAX_POINTS_KEPT:
            self.bucket *= 2
            self.points = thin(self.points, self.bucket)

    def merge(self, b: Pass) -> None:
        """Append the Pass over the range right after this one's (its line numbers shifted to follow ours).

        The range must start a line (parallel.py cuts only there): no line is seen by both Passes."""
        k = self.lines
        for idx, bagg in b.aggs.items():
            first = [_shift3(t, k) for t in bagg.first]
            last = _shift3(bagg.last, k) if bagg.last else None
            count = bagg.count
            agg = self.aggs.get(idx)
            if agg is None:
                self.aggs[idx] = SigAgg(first=first, last=last, count=count)
                continue
            agg.first = (agg.first + first)[:HITS_KEPT_PER_SIGNATURE]
            agg.last = last
            agg.count += count
        tbs = [(n + k, o) for n, o in b.tb_offsets]
        joined = self.tb_offsets + tbs
        half = TRACEBACKS_KEPT // 2
        self.tb_offsets = joined if len(joined) <= TRACEBACKS_KEPT else joined[:half] + joined[-half:]
        self.tb_total += b.tb_total
        if b.completed_line is not None:
            self.completed_line = b.completed_line + k
        if not self.nan_seen and b.nan_seen:  # the first NaN is in b: its last good save is b's, or our newest one
            self.before_nan = (b.before_nan[0] + k, b.before_nan[1]) if b.before_nan is not None else (self.saved[-1] if self.saved else None)
            self.nan_seen = True
        later = [(n + k, t) for n, t in b.saved]
        if self.saved and later and later[0][0] == self.saved[-1][0] + 1 and _continues(self.saved[-1][1], later[0][1]):
            # a save's two lines on either side of the ranges' boundary: joined as one process's scan joins them (b's
            # first entry is that second line alone, since a completion line never starts a pair)
            n, text = self.saved[-1]
            self.saved[-1] = (n, (text + " | " + later.pop(0)[1])[:400])
        self.saved = (self.saved + later)[-SAVED_KEPT:]
        shifted: set[int] = set()
        for mp in [p for _, p in b.points] + [b.nan_point, b.grad_max]:  # nan_point and grad_max may be points too
            if mp is not None and id(mp) not in shifted:
                shifted.add(id(mp))
                mp.line_no += k
        self.bucket = max(self.bucket, b.bucket)
        self.points = thin(thin(self.points, self.bucket) + thin(b.points, self.bucket), self.bucket)
        while len(self.points) > MAX_POINTS_KEPT:
            self.bucket *= 2
            self.points = thin(self.points, self.bucket)
        if self.nan_point is None and b.nan_point is not None:
            self.nan_point, self.nan_offset = b.nan_point, b.nan_offset
        if b.grad_record is not None and (self.grad_record is None or b.grad_record.value > self.grad_record.value):
            self.grad_record, self.grad_max = b.grad_record, b.grad_max
        self.point_offsets.update({n + k: o for n, o in b.point_offsets.items()})
        self.fw.merge(b.fw)
        self.line_base += b.lines
        self.ends_with_newline = b.ends_with_newline

    def metric_offsets(self) -> dict[int, int]:
        return {mp.line_no: off for off, mp in self.points}


def line_at(chunk: bytes | bytearray, counted: list[tuple[int, int]], pos: int) -> int:
    """The line number of the line starting at `pos`, counted from the nearest of the `counted` (offset, line number)
    pairs, which start with (0, the chunk's first line) and increase: forwards from the one before, or backwards from
    the one after. The pass counted the chunk up to its last sampled line already; counting again from the chunk's
    start to the grad-norm record was a fifth of the newlines counted on a 10 MiB log."""
    i = bisect.bisect_right(counted, (pos, math.inf))
    before = counted[i - 1]
    if i < len(counted) and counted[i][0] - pos < pos - before[0]:
        return counted[i][1] - newlines.count(chunk, pos, counted[i][0])
    return before[1] + newlines.count(chunk, before[0], pos)


_new_point = MetricPoint.__new__
_set = object.__setattr__


def metric_point(*, source: str, line_no: int, step: float | None, epoch: float | None, split: str, values: dict[str, float],
                 time: datetime | None, rank: int | None, batch: float | None, batches: float | None) -> MetricPoint:
    """A metric point of the parser's own making, not validated again: its fields already are what validation would
    make of them (floats, an int line number and rank, the source's name, a datetime or None), and validating cost
    7 us a point, once per metric line of a log under 2 MiB (5,000 in the 1 MiB benchmark log). On every real log each
    is the point validation gives (tests/engine/test_metric_point_built.py).

    Every field is given, so this sets what `model_construct` would (every field, in the model's order, all of them
    set; no extra or private attributes: MetricPoint has neither, nor aliases or a post-init hook, which the test
    checks) without its walk over the fields' aliases and defaults: 3.6 to 1 us a point."""
    point = _new_point(MetricPoint)
    _set(point, "__dict__", {"source": source, "line_no": line_no, "step": step, "epoch": epoch, "split": split, "values": values,
                             "time": time, "rank": rank, "batch": batch, "batches": batches})
    _set(point, "__pydantic_fields_set__", {"source", "line_no", "step", "epoch", "split", "values", "time", "rank", "batch", "batches"})
    _set(point, "__pydantic_extra__", None)
    _set(point, "__pydantic_private__", None)
    return point


def _head(name: str, chunk: bytes | bytearray) -> Excerpt:
    """The log's first lines (at most HEAD_LINES, HEAD_BYTES), where runs print their configuration."""
    lines = bytes(chunk[:HEAD_BYTES]).split(b"\n")
    cut = len(chunk) > HEAD_BYTES
    if cut or not lines[-1]:
        lines = lines[:-1]  # half a line, or the empty piece after the last newline
    return Excerpt(source=name, start_line=1, lines=redact_lines([logfile.decode(x) for x in lines[:HEAD_LINES]]),
                   truncated=cut or len(lines) > HEAD_LINES)


def grad_point(name: str, record: gradmax.Record, line_no: int) -> MetricPoint:
    """The metric point of a grad-norm record found by the scan (its line was not among the samples)."""
    raw = record.raw or b""
    parsed = metric_parser.parse_line(raw.decode("utf-8", errors="replace"))
    values, step, epoch = parsed if parsed else ({}, None, None)
    values = {**values, "grad_norm": values.get("grad_norm", record.value)}
    return MetricPoint(source=name, line_no=line_no, step=step, epoch=epoch, values=values,
                       time=metric_parser.parse_timestamp(raw[:200].decode("utf-8", errors="replace")))

