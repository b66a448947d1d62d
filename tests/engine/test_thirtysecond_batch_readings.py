"""Batch 32's misses, read as general behaviours (docs/accuracy.md, batch 32). No real run: torchelastic's restart after
a SIGKILL, Paddle's shared-memory reader, a GKE eviction and Ray's memory monitor do not run here as they failed; the
public logs themselves are the tests, and the catalog's own examples hold each new wording apart from its neighbours.

- a rank SIGKILLed, then torchelastic restarting its worker group: the rendezvous after 'will restart worker group'
  is the restart, not a wait at a sync point, so the kill is what ended the attempt (1564);
- Paddle's 'Memory map failed when rebuild shared memory' is the shared memory running out (1565);
- kubectl's 'Warning  Evicted ... ephemeral local storage usage exceeds' is the pod evicted (1579);
- Ray's 'how to address the out of memory issue: https://docs.ray.io/...' closes its memory monitor's kill (1580).
"""

from __future__ import annotations

import pytest

from tests.engine.batchcase import case, verdict


@pytest.mark.parametrize(("n", "want"), [
    ("1564", ("oom", "crashed")),
    ("1565", ("oom", "crashed")),
    ("1579", ("pipeline-orchestration", "crashed")),
    ("1580", ("oom", "crashed")),
])
def test_batch_32_public_logs(n, want):
    assert verdict(case(n)) == want


def test_a_restart_after_a_kill_is_no_wait_but_a_wait_after_a_relaunch_still_is():
    """1301: an NCCL watchdog timeout, then a relaunch that stops at its first barrier again: that stop is still read
    (the relaunch is the run's own, with its own start-up), and the class stays the collective's."""
    assert verdict(case("1301")) == ("nccl-distributed", "crashed")
