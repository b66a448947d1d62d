"""logfile._split_window splits off the two 256 KiB reads only the lines a window shows and judges with: the same
window as splitting them whole (the implementation before, kept here as the reference), on random text (long and
empty lines, cut and whole first lines, secrets whose name sits lines above) and at offsets of every real log."""

from __future__ import annotations

import random

from ml_skills.collectors import logfile
from ml_skills.collectors.logfile import CUT_CONTEXT, PRIOR_LINES, decode, decode_cut, judged

from tests import real_logs


def reference(head: bytes, tail_bytes: bytes, cut_head: bool, before: int, after: int) -> tuple[int, list[str]]:
    whole = head.split(b"\n")
    start = whole.pop()
    start_known = bool(whole) or not cut_head
    if cut_head and whole:
        whole = whole[1:]
    prev = whole[-before:] if before else []
    above = [decode(x) for x in whole[: len(whole) - len(prev)][-PRIOR_LINES:]]
    nxt = tail_bytes.split(b"\n")[: after + 1]
    if nxt and nxt[-1] == b"" and len(nxt) > 1:
        nxt.pop()
    if start and nxt:
        first = decode(start + nxt[0]) if start_known else decode_cut(start[-CUT_CONTEXT:], nxt[0])
        return len(prev), judged(above, [decode(x) for x in prev] + [first] + [decode(x) for x in nxt[1:]])
    return len(prev), judged(above, [decode(x) for x in prev + nxt])


PIECES = [b"", b"loss=0.5 step=3", b"x" * 700, b"- name: HF_TOKEN", b"  value: hf_abcdefghijklmnopqrstuvwxyz0123",
          b"db_password:", b"  desc: null", b"  value: s3cr3t-v4lue", b"\xff\xfe bad bytes", b"Traceback (most recent call last):"]


def test_random_windows_are_split_as_before() -> None:
    rng = random.Random(17)
    for _ in range(1200):
        text = b"\n".join(rng.choice(PIECES) for _ in range(rng.randint(0, 60)))
        cut = rng.randint(0, len(text))
        head, tail = text[:cut], text[cut:]
        args = (rng.random() < 0.5, rng.randint(0, 25), rng.randint(0, 25))
        assert logfile._split_window(head, tail, *args) == reference(head, tail, *args)


def test_windows_of_every_real_log_are_split_as_before() -> None:
    rng = random.Random(3)
    n = 0
    for log in real_logs.sample(real_logs.CORPUS_AND_HEALTHY, 3):
        data = log.read_bytes()
        for offset in {0, len(data), *(rng.randint(0, len(data)) for _ in range(3))}:
            back = min(offset, 256 * 1024)
            args = (data[offset - back : offset], data[offset : offset + 256 * 1024], offset - back > 0, 20, 20)
            assert logfile._split_window(*args) == reference(*args), (log, offset)
            n += 1
    assert n > 2000
