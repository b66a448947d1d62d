"""Batch 45's misses, read as general behaviours (docs/accuracy.md, batch 45; scored at a48c56f before any change):

- `RayTaskError(WorkerCrashedError)` (or `(ActorDiedError)`) is the orchestrator carrying back a worker process that
  died, not a task that raised: a process crash, as the bare WorkerCrashedError is (1866, an OpenRLHF reward worker, was
  read as pipeline-orchestration from the wrapper alone: its paste ends on that line);
- pickle's "Can't get attribute 'X' on <module ...>" is a checkpoint that cannot be loaded by the code reading it
  (1883, YOLOv8's 'Skipping last.pt, not a valid Ultralytics model: Can't get attribute ...' warnings before the final
  validation fails, was read as data-pipeline).

The Ray worker's death and the unpicklable model are real CPU runs; 1866 and 1883 are verbatim public logs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.batchcase import case, run_script, verdict


def test_a_ray_task_error_carrying_a_worker_crash_is_a_process_crash():
    assert verdict(case("1866")) == ("process-crash", "crashed")


_RAY = """
import os
import ray
ray.init(num_cpus=2, include_dashboard=False)

@ray.remote(max_retries=0)
def score(batch):
    os._exit(1)  # the reward worker's process dies under the task

@ray.remote
class RewardModel:
    def get_rewards(self, batch):
        return ray.get(score.remote(batch))

rm = RewardModel.remote()
print("step 1 rollout done", flush=True)
ray.get(rm.get_rewards.remote([1, 2, 3]))
"""


def test_a_real_worker_death_carried_back_by_an_actor_reads_as_a_crash_even_cut_at_the_wrapper(tmp_path: Path):
    pytest.importorskip("ray")
    (tmp_path / "train.py").write_text(_RAY)
    log = tmp_path / "train.log"
    with open(log, "wb") as out:  # its own HOME: ray.init() writes ~/.ray/auth_token (see test_remote_task_exception)
        env = {**os.environ, "HOME": str(tmp_path), "RAY_USAGE_STATS_ENABLED": "0"}
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=180,
                       check=False, env=env)
    lines = log.read_text(errors="replace").splitlines(keepends=True)
    wrapper = next(i for i, x in enumerate(lines) if "RayTaskError(WorkerCrashedError)" in x)
    assert verdict(log) == ("process-crash", "crashed")
    start = max(i for i in range(wrapper) if lines[i].startswith("Traceback (most recent call last)"))
    cut = tmp_path / "cut.log"  # a paste of the driver's traceback that ends on the wrapper's line, as 1866's does
    cut.write_text("".join(lines[start : wrapper + 1]))
    assert verdict(cut)[0] == "process-crash"


def test_an_unloadable_pickled_checkpoint_skipped_with_a_warning_is_a_checkpoint_failure():
    assert verdict(case("1883"))[0] == "io-checkpoint"


_SAVE_WHOLE = """
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

    torch.save(Net(), "last.pt")  # the whole module, pickled by its class in __main__
"""
_LOAD_ELSEWHERE = """
    import torch
    for name in ("last.pt",):
        try:
            torch.load(name, weights_only=False)
        except Exception as e:
            print(f"WARNING Skipping {name}, not a valid model: {e}", flush=True)
    print("Validating last.pt...", flush=True)
    raise SystemExit(1)
"""


def test_a_real_checkpoint_pickled_in_another_main_cannot_be_loaded(tmp_path: Path):
    run_script(tmp_path, _SAVE_WHOLE, check=True)
    log = run_script(tmp_path, _LOAD_ELSEWHERE)
    assert "Can't get attribute 'Net' on <module '__main__'" in log.read_text()
    assert verdict(log)[0] == "io-checkpoint"
