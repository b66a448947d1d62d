"""Batch 41's misses, read as general behaviours (docs/accuracy.md, batch 41; scored at 0bb23c0 before any change):

- Ray's 'The node with client ID ... has been marked dead because the monitor has missed too many heartbeats from it'
  (and the newer '... because the detector has missed ...') is a node lost under the job, like a worker that died: a
  process crash, with the driver's RayGetError after it its consequence (1746 was read as config-error by that
  RayGetError, an exception no rule knows).
- an RL loop's 'upd 488/488' (its update counter at its total) is the run's own end: with the checkpoint, evaluation and
  GIF it prints after it, the run completed (healthy 750 was 'unknown'); the same log cut at 'upd 487/488' did not end.

Verbatim public logs stand for the shapes (a Ray cluster and the PPO job are not run here); the cut is one contiguous
slice of the committed file."""

from __future__ import annotations

from tests.engine.batchcase import case, verdict


def test_a_ray_node_marked_dead_for_missed_heartbeats_is_a_process_crash():
    assert verdict(case("1746")) == ("process-crash", "crashed")


def test_an_update_counter_at_its_total_ends_the_run_and_one_short_of_it_does_not(tmp_path):
    log = case("750", "healthy")
    assert verdict(log) == (None, "completed")
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    last = max(i for i, x in enumerate(lines) if "upd  487/488" in x)
    cut = tmp_path / "train.log"
    cut.write_text("".join(lines[: last + 3]), encoding="utf-8")
    assert verdict(cut)[1] != "completed"
