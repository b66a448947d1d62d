"""Batch 49's misses, read as general behaviours (docs/accuracy.md, batch 49; scored at e66e8e3 before any change):

- nvidia's 'Detected Critical Xid Error' is the GPU failing, as 'NVRM: Xid' is (1963, read as data-pipeline from the
  traceback after it);
- ROCm's 'HSA_STATUS_ERROR_EXCEPTION' (and 'Memory access fault by GPU node-N') is a kernel fault on an AMD GPU, the
  counterpart of a CUDA illegal access (1969 abstained);
- a log ending inside the traceback Python's threading printed for a thread ('Exception in thread Thread-1:') ends with
  that thread, not the process (healthy 825 and 829, DeepLabCut's queue-runner thread cancelled once training reached
  its last iteration, read as crashed).

1963, 1969, healthy 825 and 829 are verbatim public logs (a real run cannot end inside its own traceback: only a paste
or a copy cut mid-way does)."""

from __future__ import annotations

from tests.engine.batchcase import case, verdict


def test_a_critical_xid_error_is_the_gpu_failing():
    assert verdict(case("1963")) == ("cuda-runtime", "crashed")


def test_rocm_hsa_exception_is_a_kernel_fault():
    assert verdict(case("1969")) == ("cuda-runtime", "crashed")


def test_a_queue_threads_traceback_after_the_last_iteration_is_not_a_crash():
    assert verdict(case("0825", "healthy"))[1] != "crashed"
    assert verdict(case("0829", "healthy"))[1] != "crashed"
