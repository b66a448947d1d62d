"""The run's own counters on one line: an epoch and the iteration within it, printed together (mmcv's
'Epoch [8][208/2000]', a GAN script's '[Epoch 8/100] [Batch 208/2000]', a Keras bar under its 'Epoch 8/100').

Read beside metrics.parse_line (a line's values) so a point says where in its epoch it stands, not only a step.
"""

from __future__ import annotations

from typing import Any

from ml_skills.lazyre import lazy

_MISSING = object()


# The run's own counters where an epoch and an iteration within it are printed together: mmcv/mmengine's
# 'Epoch [8][208/2000]' and 'Epoch(train) [1][240/735]', DCGAN-tensorflow's 'Epoch: [ 8/200] [ 208/2000]', the ImageNet example's 'Epoch: [8][208/2000]', GAN
# scripts' '[Epoch 8/100] [Batch 208/2000]', loguru trainers' 'E6 iter[ 14/ 15]', the MNIST example's 'Train
# Epoch: 8 [26624/60000 (44%)]' (samples, not batches), MXNet's 'Epoch[0] Batch [41940-41960]', and a Keras bar
# '208/2000 [====' under its 'Epoch 8/100'.
_EPOCH_ITER_WORDS = (
    r"(?:\bepoch(?:\(\w+\))?\s*(?::\s*)?\[\s*(?P<e1>\d+)\s*(?:/\s*\d+\s*)?\]\s*\[\s*(?P<i1>\d+)\s*/\s*(?P<n1>\d+)\s*\]|"
    r"\[\s*epoch\s+(?P<e2>\d+)\s*/\s*\d+\s*\]\s*\[\s*(?:batch|iter(?:ation)?)\s+(?P<i2>\d+)\s*/\s*(?P<n2>\d+)\s*\]|"
    r"\be(?P<e3>\d+)\s+iter\[\s*(?P<i3>\d+)\s*/\s*(?P<n3>\d+)\s*\]|"
    r"\btrain epoch:\s*(?P<e4>\d+)\s*\[\s*(?P<i4>\d+)\s*/\s*(?P<n4>\d+)|"
    # and a loop's own 'Epoch 10 ; Iter 50/213', 'epoch 3, iter 50/213', 'Epoch: 2 | Batch: 100/500' (a counter out of
    # the epoch's iterations, right after the epoch), or with no total, as icefall/k2 recipes print it ('Epoch 1, batch
    # 8500, train_loss[...]': the iteration within the epoch, its count per epoch unsaid)
    r"\bepoch\s*(?::\s*)?(?P<e5>\d+)\s*(?:/\s*\d+\s*)?(?:[,;|]\s*)?(?:batch|iter(?:ation)?)\s*(?::\s*)?(?P<i5>\d+)(?:\s*/\s*(?P<n5>\d+))?|"
    # MXNet's Speedometer: 'Epoch[0] Batch [41940-41960]\tSpeed: ...' (the batches since its last line; the last is
    # where the epoch stands) and the older 'Epoch[3] Batch [200]'
    r"\bepoch\[(?P<e6>\d+)\]\s*batch\s*\[(?:\d++-)?(?P<i6>\d+)\])"
)
# Each run of spaces is read by one quantifier (`\s*(?::\s*)?`, not `\s*:?\s*`; the same language): the last form's three
# pairs of quantifiers tried every split of three runs, each against the others, 11 s for one 400-character head of
# 'epoch', spaces, '1', spaces, 'iter', spaces (twenty-fourth round).
_EPOCH_ITER = lazy("(?i)" + _EPOCH_ITER_WORDS)
# The same on the text lower-cased first: a case-sensitive pattern lets `re` skip to the positions its first
# characters allow, where (?i) tries every one (a line 23 to 3 us). The two agree on any text without _ASCII_FOLDS:
# there (?i) matches a pattern letter to A-Z only, and lower() keeps every offset, digit, space and word character.
# Every match holds 'epoch' or 'iter[': a line with neither is none.
_EPOCH_ITER_LOWER = lazy(_EPOCH_ITER_WORDS)
# The characters beyond ASCII that (?i) matches to an ASCII letter or that lower() makes ASCII or longer: dotted and
# dotless I, long s, the Kelvin sign (tests/engine/test_epoch_iteration_gate.py derives them from the running Python).
ASCII_FOLDS = "\u0130\u0131\u017f\u212a"
KERAS_BAR = lazy(r"^\s*(?P<i>\d+)/(?P<n>\d+) \[[=>.]")
# An epoch header on a line of its own: Keras' 'Epoch 8/100', a logger's '... - INFO - [Epoch 1/20]', '=== Epoch 3 ===',
# 'Starting epoch 3', 'EPOCH 3 of 10'. Read on the line lower-cased; nothing but separators may follow the counter (a
# line going on with words or values is the epoch's own line, read by the formats). Matched against one line at a
# time, found by the literal 'poch' (a run of blank lines cost nothing: twenty-second round).
# Each run of spaces is read by one quantifier: `epoch\s*:?\s*\[?\s*(?P<e>\d+)\s*(?:(?:/|of)\s*(?P<n>\d+)\s*)?\]?[\s...]*$`, the
# same language, tried every split of a run among three, then of the run after the counter between two: a 101-byte line of
# 'epoch', 47 spaces, '1', 47 spaces and a letter cost 23 ms, and 2,000 of them over metric lines held the CLI 47 s
# (twenty-fourth round).
EPOCH_HEAD = lazy(r"^(?:[^\n]{0,120}?[\s\[|:=#*>(-])?epoch\s*(?::\s*)?(?:\[\s*)?(?P<e>\d+)(?:\s*(?:/|of)\s*(?P<n>\d+))?(?:\s*\])?"
                  r"[\s:=*#|>)\-]*$")
HEAD_WINDOW = 65536  # how far above a metric line its epoch header is looked for
HEAD_TAIL = 100  # the most a header line may go on after its 'poch' ('Epoch 1/20]' and a rule of separators)


class EpochHeads:
    """The epoch header last above each metric line of one chunk that prints no epoch of its own, within HEAD_WINDOW
    bytes: a Keras bar under its 'Epoch 8/100', a logger's 'Train Loss: 3.18' under '[Epoch 1/20]'. The chunk is read
    once, in order, as its metric lines come (each line's own look back over 64 KiB cost 0.5 ms a line)."""

    def __init__(self, chunk: bytes | bytearray) -> None:
        self.chunk, self.read_to = chunk, 0
        self.last: tuple[int, float] | None = None  # (offset of the header line, its epoch)

    def _scan(self, word: bytes, start: int, end: int) -> None:
        chunk = self.chunk
        at = chunk.find(word, start, end)
        while at >= 0:
            s = chunk.rfind(b"\n", 0, at) + 1
            e = chunk.find(b"\n", at)
            e = len(chunk) if e < 0 else e
            # a header ends within a few separators of its counter: a longer rest is the epoch's own line (not read here)
            if e <= end and e - at <= HEAD_TAIL and (m := EPOCH_HEAD.match(bytes(chunk[s:e]).decode("utf-8", "replace").lower())) is not None \
                    and (self.last is None or s >= self.last[0]):
                self.last = (s, float(m["e"]))
            at = chunk.find(word, e, end)

    def above(self, s: int) -> float | None:
        """The epoch of the last header line starting in the HEAD_WINDOW bytes before offset s (s after the previous call's)."""
        start = max(self.read_to, s - HEAD_WINDOW)
        if start < s:
            self._scan(b"poch", start, s)
            self._scan(b"POCH", start, s)
        self.read_to = max(self.read_to, s)
        return self.last[1] if self.last is not None and self.last[0] >= s - HEAD_WINDOW else None


def _epoch_iteration_spans(head: str) -> tuple[tuple[int, int], ...] | None:
    """The spans in `head` of the epoch, the iteration and the iterations per epoch, or None."""
    if head.isascii() or not any(c in head for c in ASCII_FOLDS):
        low = head.lower()
        m = _EPOCH_ITER_LOWER.search(low) if "epoch" in low or "iter[" in low else None
    else:
        m = _EPOCH_ITER.search(head)
    if m is None:
        return None
    k = next(i for i in "123456" if m[f"e{i}"] is not None)
    return m.span(f"e{k}"), m.span(f"i{k}"), m.span(f"n{k}") if f"n{k}" in m.re.groupindex else (-1, -1)


def epoch_iteration(line: str, memo: dict[str, Any] | None = None) -> tuple[float, float, float | None] | None:
    """(epoch, iteration within it, iterations per epoch or None when unsaid) when the line prints them together, else
    None. `memo`: as parse_line's."""
    head = line[:400]
    if memo is None:
        spans = _epoch_iteration_spans(head)
    elif (spans := memo.get("epoch-iteration", _MISSING)) is _MISSING:
        spans = memo["epoch-iteration"] = _epoch_iteration_spans(head)
    if spans is None:
        return None
    (es, ee), (is_, ie), (ns, ne) = spans
    return float(head[es:ee]), float(head[is_:ie]), float(head[ns:ne]) if ns >= 0 else None
