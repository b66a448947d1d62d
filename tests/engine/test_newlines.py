"""Line numbers come from newlines.count: the vector path must count exactly what bytes.count does."""

from __future__ import annotations

import random

from ml_skills.engine.read import newlines


def test_vector_count_equals_bytes_count_on_any_range():
    newlines.use_vectors(newlines.VECTOR_LOG_BYTES)  # a log this large imports numpy
    assert newlines._np is not None
    rng = random.Random(7)
    buf = bytearray(rng.choice(b"ab\n\r x") for _ in range(3 * newlines.VECTOR_MIN + 123))
    for _ in range(200):
        start = rng.randrange(len(buf))
        end = rng.randrange(start, len(buf) + 10)
        assert newlines.count(buf, start, end) == buf.count(b"\n", start, end), (start, end)
    assert newlines.count(buf) == buf.count(b"\n")
    assert newlines.count(bytes(buf), 1, None) == buf.count(b"\n", 1)


def test_a_small_log_does_not_ask_for_numpy():
    before = newlines._np
    newlines._np, newlines._tried = None, False
    try:
        newlines.use_vectors(newlines.VECTOR_LOG_BYTES - 1)
        assert newlines._np is None and not newlines._tried
    finally:
        newlines._np, newlines._tried = before, before is not None
