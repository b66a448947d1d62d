"""Fingerprints: the same failure in two runs reads the same; different failures never do."""

from __future__ import annotations

import pytest
from ml_skills.collectors.attempts import split_name
from ml_skills.engine.classify.fingerprint import fingerprint, normalise, signature
from ml_skills.engine.plan.repeat import repeat_verdict
from ml_skills.grid.models import AttemptBrief, Outcome, Repeat

SAME = [
    # (line in run A, the same failure in run B): numbers, paths, ranks, hosts, pids, times differ
    ("[2026-12-01 14:51:06] step 49 | loss inf | lr 1000", "[2026-11-30 09:02:11] step 58 | loss inf | lr 300"),
    ("bash: line 1: 23835 Killed                  python /work/a/cell.py", "bash: line 1: 911 Killed python /home/b/x/cell.py"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-07.bin'",
     "FileNotFoundError: [Errno 2] No such file or directory: '/mnt/vol2/shard-11.bin'"),
    ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000)",
     "[Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=600000)"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 3 has a total capacity of 23.6 GiB"),
    ("connect to node-07.cluster.local 10.0.0.3:29500 failed (pid 4242)", "connect to gpu-112.cluster.local 10.1.8.77:29400 failed (pid 17)"),
    ("segfault at 0x7f3a2b00 ip 00007f3a2b00ffee", "segfault at 0x55d1 ip 00005571c0de1234"),
    ("job 3fa9c2e1-0b1c-4d2e-8f00-123456789abc failed at 2026-12-01T10:00:00Z", "job 0e1d2c3b-aaaa-4bbb-8ccc-ddddeeeeffff failed at 2026-11-02T23:59:59+02:00"),
]
DIFFERENT = [
    ("KeyError: 'adamw'", "KeyError: 'lion'"),
    ("RuntimeError: expected scalar type Float but found BFloat16", "RuntimeError: expected scalar type Float but found Half"),
    ("dtype float16 is not supported", "dtype float32 is not supported"),
    ("CUDA out of memory", "CUDA error: an illegal memory access was encountered"),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_failure_with_different_numbers_paths_and_hosts_normalises_to_one_line(a: str, b: str) -> None:
    assert normalise(a) == normalise(b)
    assert fingerprint(signature("x", "r", a)) == fingerprint(signature("x", "r", b))


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_failures_keep_different_fingerprints(a: str, b: str) -> None:
    assert normalise(a) != normalise(b)


def test_class_and_rule_are_part_of_the_fingerprint() -> None:
    line = "RuntimeError: boom"
    assert len({fingerprint(signature(c, r, line)) for c, r in (("oom", "a"), ("nan-inf", "a"), ("oom", "b"))}) == 3


def test_hostile_lines_stay_bounded_and_private_use_characters_cannot_forge_a_value() -> None:
    assert len(normalise("x" * 100_000)) == 240
    assert normalise("\ue000 float32 \ue001") == normalise("float32")


@pytest.mark.parametrize(("name", "key", "n"), [
    ("attempt-2", "", 2), ("retry_1", "", 1), ("lr0.1-seed1-retry2", "lr0.1-seed1", 2), ("train.restart3.log", "train.log", 3),
    ("cell-07", "cell-07", 0), ("attempts", "attempts", 0), ("entry-3", "entry-3", 0), ("resubmit4", "", 4),
])
def test_attempt_numbers_are_read_from_names(name: str, key: str, n: int) -> None:
    assert split_name(name) == (key, n)


def _a(n: int, outcome: Outcome, fp: str | None, step: float | None) -> AttemptBrief:
    return AttemptBrief(attempt=n, outcome=outcome, fingerprint=fp, last_step=step, path=f"attempt-{n}")


F = Outcome.FAILED


@pytest.mark.parametrize(("attempts", "kind"), [
    ([_a(1, F, "x", 48), _a(2, F, "x", 48)], Repeat.SAME_NO_PROGRESS),
    ([_a(1, F, "x", 48), _a(2, F, "x", 30)], Repeat.SAME_NO_PROGRESS),
    ([_a(1, F, "x", None), _a(2, F, "x", None)], Repeat.SAME_NO_PROGRESS),  # dies at start-up both times
    ([_a(1, F, "x", 30), _a(2, F, "x", 70)], Repeat.SAME_PROGRESSED),
    ([_a(1, F, "x", 30), _a(2, F, "y", 10)], Repeat.DIFFERENT),
    ([_a(1, F, "x", 30), _a(2, Outcome.COMPLETED, None, 80)], Repeat.RECOVERED),
    ([_a(1, F, "x", 30), _a(2, Outcome.COMPLETED, None, 80), _a(3, F, "x", 30)], Repeat.SAME_NO_PROGRESS),
])
def test_the_last_attempt_is_read_against_the_last_failed_one_before_it(attempts: list[AttemptBrief], kind: Repeat) -> None:
    v = repeat_verdict(attempts)
    assert v is not None and v.kind is kind
    assert ("relaunching will fail the same way" in v.reason) == (kind is Repeat.SAME_NO_PROGRESS)


def test_a_single_attempt_or_no_failure_before_has_no_verdict() -> None:
    assert repeat_verdict([_a(0, F, "x", 3)]) is None
    assert repeat_verdict([_a(1, Outcome.COMPLETED, None, 3), _a(2, F, "x", 3)]) is None
