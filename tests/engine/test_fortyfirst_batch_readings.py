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


_ONECYCLE = """
    import torch
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=100)  # built for 100 steps
    x = torch.randn(256, 4); y = x.sum(1, keepdim=True)
    for epoch in range(1, 4):  # 3 epochs of 40 batches: 120 steps
        for b in range(40):
            loss = torch.nn.functional.mse_loss(model(x[b * 6:b * 6 + 6]), y[b * 6:b * 6 + 6])
            opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        print(f"epoch {epoch}/3 | loss {loss.item():.4f} | lr {sched.get_last_lr()[0]:.4g}", flush=True)
"""


def test_a_one_cycle_schedule_stepped_past_its_total_plans_the_schedule_first(tmp_path):
    """OneCycleLR's 'Tried to step 101 times. The specified number of total steps is 100' (1761's GrowSP run, 60002
    of 60000): the schedule was built for fewer steps than the run trains; the plan's first fix is the schedule's
    length, not a generic configuration key (a real CPU run)."""
    from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

    from tests.engine.batchcase import run_script

    log = run_script(tmp_path, _ONECYCLE)
    assert "Tried to step 101 times. The specified number of total steps is 100" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"
    assert d.fixes[0].fix_id == "fix-lr-schedule", [f.fix_id for f in d.fixes]
