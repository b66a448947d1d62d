"""Which lines of a chunk the scan parses as metrics, found without parsing the others.

Metric lines are found by their `loss` anchor: every one on small logs, an even sample on large
ones. Small logs also give lines that print an accuracy without a loss; sampled logs also give
every validation-metric line of a chunk that has few (the sample would miss them).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ml_skills.engine.read import kvblocks, tables
from ml_skills.engine.read.matcher import Matcher, ScanLimit
from ml_skills.lazyre import lazy

EVAL = r"(?i)\b(val|eval|valid|validation|test|dev)[_ /-]?(lm[_ ])?(loss|acc|accuracy|top1|f1|ppl|perplexity)\b"
EVAL_LINES_PER_CHUNK = 256

_LOSS = lazy(rb"(?i)loss")
# an accuracy printed on a line of its own, without a loss (MXNet's `Epoch[3] Train-accuracy=0.92` and
# `Validation-accuracy=0.51`, hand-written loops), or a perplexity or cross-entropy that stands for the loss (OpenNMT's
# `acc: 0.19; ppl: 12.5; xent: 2.52`, `PPL 35.2`, `Validation perplexity: 35.1`), or a boosting round's score or error
# (`[7]\tvalidation_0-rmse:0.41`, `valid_0's l2: 0.3`), or a schedule's 'Updating learning rate to 1.68e-24': read on logs
# whose every metric line is parsed
_ACCURACY = lazy(rb"(?i)accuracy\s*[=:]|\b(?:ppl|perplexity|xent)\b|(?:'s |-)(?:auc|r?mse|mae|rmsle|mape|l[12]|huber|m?error)\s*:"
                 rb"|(?:learning[ _]rate|\blr)\s+(?:[a-z]+\s+)?to:?\s+[-+.\d]")


def line_bounds(chunk: bytes | bytearray, end: int) -> tuple[int, int]:
    """(start, stop) of the line in which a match ending at `end` lies."""
    pos = max(0, end - 1)
    start = chunk.rfind(b"\n", 0, pos) + 1 if pos > 0 else 0
    if end > 0 and chunk[end - 1 : end] == b"\n":
        start = chunk.rfind(b"\n", 0, end - 1) + 1
    stop = chunk.find(b"\n", start)
    return start, (len(chunk) if stop < 0 else stop)


def loss_lines(chunk: bytes | bytearray, budget: int | None) -> list[int]:
    """Start offsets of lines holding a loss value; every one, or an even sample of `budget`.

    Sampling jumps `stride` bytes and takes the next loss line from there, so its cost does not
    grow with the number of lines in the chunk.
    """
    starts: list[int] = []
    stride = 0 if budget is None else max(1, len(chunk) // max(1, budget))
    pos = 0
    while (m := _LOSS.search(chunk, pos)) is not None:
        s = chunk.rfind(b"\n", 0, m.start()) + 1
        if not starts or s != starts[-1]:
            starts.append(s)
        nxt = chunk.find(b"\n", m.end())
        if nxt < 0:
            break
        pos = nxt + 1 if not stride else max(nxt + 1, s + stride)
    return starts


Row = tuple[dict[str, float], float | None, float | None]
# the ASCII characters str.strip() strips; a byte from 0x80 may start a character it strips too (b'\xc2\xa0')
_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def table_rows(chunk: bytes | bytearray, starts: list[int]) -> dict[int, Row]:
    """Rows of the metric tables whose header is one of the lines at `starts`, parsed, by start offset.

    A table's rows are the lines right below its header that read as rows of it; the first line that
    does not ends the table (a blank line, a '...', the next report).
    """
    rows: dict[int, Row] = {}
    for s in starts:
        e = chunk.find(b"\n", s)
        raw = chunk[s : (len(chunk) if e < 0 else e)]
        first = raw.lstrip(_ASCII_SPACE)[:1]
        if not first or (first < b"\x80" and not first.isalpha()):
            continue  # tables.header refuses a text that does not start with a letter once stripped: decoded, not read
        head = tables.header(raw.decode("utf-8", errors="replace"))
        n = 0
        while head is not None and e >= 0 and n < tables.MAX_ROWS:
            pos, e = e + 1, chunk.find(b"\n", e + 1)
            text = chunk[pos : (len(chunk) if e < 0 else e)].decode("utf-8", errors="replace")
            if "\r" in text:  # a row redrawn with its bar (Ultralytics' epoch row): its last frame
                text = next((f for f in reversed(text.split("\r")) if f.strip()), "")
            parsed = tables.row(head, text)
            if parsed is None:
                break
            rows[pos] = parsed
            n += 1
    return rows


def block_rows(chunk: bytes | bytearray, starts: list[int]) -> tuple[dict[int, Row], set[int]]:
    """Key-value blocks (engine/read/kvblocks.py) holding a line at `starts`, each read whole into one point, given
    to the block's loss row (else its first metric row); the block's other lines at `starts` are returned to drop."""
    rows: dict[int, Row] = {}
    drop: set[int] = set()
    end_of_block = -1
    for s in starts:
        if s < end_of_block:
            continue  # a line of the block just read: in `drop` already, or its anchor
        if chunk[s : s + 1] != b"|":
            continue  # the logger prints its rows from the line's first column: every other line is passed at one byte
        e = chunk.find(b"\n", s)
        if not kvblocks.is_row(chunk[s : (len(chunk) if e < 0 else e)]):
            continue
        offsets, lines = _block(chunk, s)
        end_of_block = offsets[-1] + len(lines[-1]) + 1
        drop |= set(offsets)
        if (found := kvblocks.record(lines)) is not None:
            rec, anchor = found
            rows[offsets[anchor]] = rec
            drop.discard(offsets[anchor])
    return rows, drop


def _block(chunk: bytes | bytearray, s: int) -> tuple[list[int], list[bytes]]:
    """(start offsets, lines) of the key-value block holding the row that starts at `s`."""
    first = s
    for _ in range(kvblocks.MAX_BLOCK_LINES):
        if first == 0:
            break
        prev = chunk.rfind(b"\n", 0, first - 1) + 1
        if not kvblocks.is_row(chunk[prev : first - 1]):
            break
        first = prev
    offsets: list[int] = []
    lines: list[bytes] = []
    pos = first
    while len(lines) < kvblocks.MAX_BLOCK_LINES and pos <= len(chunk):
        e = chunk.find(b"\n", pos)
        line = bytes(chunk[pos : (len(chunk) if e < 0 else e)])
        if not kvblocks.is_row(line):
            break
        offsets.append(pos)
        lines.append(line)
        if e < 0:
            break
        pos = e + 1
    return offsets, lines


def accuracy_lines(chunk: bytes | bytearray) -> set[int]:
    """Start offsets of the lines that print an accuracy (`accuracy=`, `accuracy:`).

    After a line's first match the search resumes at the next line, as in loss_lines: searching back
    to the line's start for every match was quadratic in a long line repeating `accuracy=`.
    """
    starts: set[int] = set()
    pos = 0
    while (m := _ACCURACY.search(chunk, pos)) is not None:
        starts.add(chunk.rfind(b"\n", 0, m.start()) + 1)
        nxt = chunk.find(b"\n", m.end())
        if nxt < 0:
            break
        pos = nxt + 1
    return starts


@cache
def _eval_matcher(engine: str | None) -> Matcher:
    return Matcher([EVAL], engine=engine)


def eval_lines(chunk: bytes | bytearray, engine: str | None) -> set[int]:
    """Start offsets of the chunk's validation-metric lines, when they are few.

    An even sample of a sampled log's metric lines holds few of its rare evaluation lines (one per
    epoch among thousands of step lines), and the validation curve is what shows memorisation or
    a broken evaluation. When there are more than EVAL_LINES_PER_CHUNK (a bar that shows val_loss
    on every frame), the even sample already holds plenty.
    """
    try:
        ends = _eval_matcher(engine).find(chunk, limit=EVAL_LINES_PER_CHUNK + 1)
    except ScanLimit:
        return set()
    return {line_bounds(chunk, end)[0] for _, end in ends}


# The rank a line belongs to when every rank writes to one log: torch's '[rank3]:', torchrun --tee's '[default3]:',
# mpirun's '[1,3]<stdout>:', a script's own 'rank 3:' / 'rank=3 |' / '[R3]' / '[Rank 3]', Ray's '(RayTrainWorker pid=42)'.
_RANK = lazy(
    r"^\s*(?:\[rank(?P<a>\d+)\]:|\[default(?P<b>\d+)\]:|\[\d+,(?P<c>\d+)\]<std(?:out|err)>:|"
    r"\(\w+ pid=(?P<d>\d+)(?:, ip=[\d.]+)?\)|"
    r"(?:.{0,80}?[\s|\[(-])?(?:\[R(?P<e>\d+)\]|\[?[Rr]ank[\s:=_]{0,2}(?P<f>\d+)\]?(?=[\s:|,\]/])))"
)


def _rank_span(head: str) -> tuple[int, int] | None:
    m = _RANK.match(head)
    if m is None:
        return None
    return m.span(next(i for i, g in enumerate(m.groups(), 1) if g is not None))


def rank_of(line: str, memo: dict[str, Any] | None = None) -> int | None:
    """The rank tag at the start of a metric line (or a worker's pid for Ray), or None. `memo`: the line's shape memo
    (metric_shapes.shape_memo): _RANK is digit-blind, so the tag is at the same place on every line of a shape."""
    head = line[:160]
    if memo is None:
        span = _rank_span(head)
    elif (span := memo.get("rank", None)) is None and "rank" not in memo:
        span = memo["rank"] = _rank_span(head)
    return None if span is None else int(head[span[0]:span[1]])
