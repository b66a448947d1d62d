"""Batch 35's healthy miss, read as a general behaviour, and the guard it needed (docs/accuracy.md, batch 35):

- a symptom its program logged at INFO level with no error's words (NCCL's 'NCCL INFO [Service thread] Connection closed
  by localRank 1' as each rank tears its communicator down after 'Training done') ends nothing: healthy 712 completed;
- a line that names either ending ('Training completed or interrupted', verl's main loop) is no completion marker: with
  the INFO lines no longer read as the end, corpus 907's dead Ray actor before it would have been outlived.

NCCL prints its INFO lines only with GPUs; the public log stands for that shape. The either-ending line is a real run."""

from __future__ import annotations

import pytest

from tests.engine.batchcase import case, run_script, verdict

pytestmark = pytest.mark.slow  # a real script in a child process


def test_nccl_info_lines_of_a_finished_runs_teardown_are_no_crash_public_log():
    assert verdict(case("712", "healthy")) == (None, "completed")  # 'Training done', then NCCL INFO aborts on every rank


EITHER_END = """
    import sys, traceback
    try:
        for step in range(1, 6):
            print(f"step {step} loss={1.0 / step:.4f}", flush=True)
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    except RuntimeError:
        traceback.print_exc()
        sys.exitcode = 1
    finally:
        print("[MAIN] Training completed or interrupted", flush=True)
    sys.exit(1)
"""


def test_a_line_naming_either_ending_is_no_completion(tmp_path):
    log = run_script(tmp_path, EITHER_END)
    assert "Training completed or interrupted" in log.read_text()
    assert verdict(log) == ("cuda-runtime", "crashed")
    assert verdict(case("907")) == ("process-crash", "crashed")  # verl: the actor died, then the same line
