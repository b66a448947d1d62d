"""Key-value blocks (engine/read/kvblocks.py): the `| key | value |` records of OpenAI baselines' logger, as real
Stable-Baselines3 runs print them, and a verbatim guided-diffusion record from a public report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("stable_baselines3")

ROOT = Path(__file__).resolve().parents[2]

# PPO on CartPole on the CPU, verbose=1: a block per rollout, train/ keys from the second one on. With NAN_AT set, the
# environment's reward turns nan from that step on (an environment bug, as reports of nan rewards describe): the
# advantages go nan, the next update makes the policy's logits nan, and torch's Categorical refuses them (a ValueError that
# ends the run right after the block of step 256).
SCRIPT = r"""
import math, sys
import gymnasium as gym
from stable_baselines3 import PPO

NAN_AT = int(sys.argv[1])

class NanReward(gym.Wrapper):
    steps = 0
    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        NanReward.steps += 1
        return obs, (math.nan if NAN_AT and NanReward.steps >= NAN_AT else r), term, trunc, info

env = NanReward(gym.make("CartPole-v1"))
model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, verbose=1, seed=0, device="cpu")
model.learn(total_timesteps=448)
"""


def _run(tmp_path: Path, nan_at: int) -> Path:
    log = tmp_path / f"ppo{nan_at}.log"
    with log.open("w") as f:
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(nan_at)], stdout=f, stderr=subprocess.STDOUT, check=False,
                              timeout=600, cwd=tmp_path, env={**os.environ, "SB3_LOGDIR": str(tmp_path)})
    assert (done.returncode != 0) == bool(nan_at), log.read_text()[-2000:]
    return log


def test_a_healthy_sb3_run_gives_its_loss_per_rollout_at_its_timestep(tmp_path: Path) -> None:
    log = _run(tmp_path, 0)
    text = log.read_text()
    assert "|    loss                 |" in text and "total_timesteps" in text  # the format this reads, as SB3 prints it
    d = diagnose(DiagnoseRequest(target=str(log)))
    loss = next(s for s in d.trajectory if s.name == "loss")
    assert loss.count == 6  # one point per block with train/ keys (rollouts 2-7), not one per loss-like row
    assert [step for step, _ in loss.points] == [128, 192, 256, 320, 384, 448]  # at SB3's time/total_timesteps
    assert d.primary_cause is None and d.run_status.value in ("running", "completed", "unknown")


def test_nan_rewards_crash_sb3_and_the_last_block_read_is_its_last_progress(tmp_path: Path) -> None:
    log = _run(tmp_path, 200)
    assert "|    ep_rew_mean          | nan" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", d.evidence
    last = next(e for e in d.evidence if e.text.startswith("last progress"))
    assert "step 256" in last.text and "loss=" in last.text  # the block before the crash, at its total_timesteps


def test_a_guided_diffusion_record_all_nan_is_read_as_the_first_loss_the_excerpt_shows() -> None:
    case = next((ROOT / "tests" / "corpus").glob("1255-*"))
    assert json.loads((case / "case.json").read_text())["primary_cause"] == "nan-inf"
    d = diagnose(DiagnoseRequest(target=str(case / "train.log")))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    onset = next(e for e in d.evidence if "non-finite" in e.text)
    assert "| loss          | nan" in onset.text  # the loss row cited, not lg_loss_scale's above it
    assert "steps before it are not in the log" in onset.text  # the excerpt starts at its nan: no history claimed


def test_long_lines_shaped_like_rows_are_read_in_one_pass(tmp_path: Path) -> None:
    """A bar and a key followed by a megabyte of spaces (a first version's lazy cells took quadratic time on it: hours
    for this file). The diagnosis runs in a child process with a timeout far above a linear read's time."""
    log = tmp_path / "train.log"
    with log.open("wb") as f:
        f.write(b"| loss" + b" " * 2**20 + b"\n")
        f.write(b"| loss |" + b" " * 2**20 + b"x\n")
        f.write(b"|" + b" " * 2**19 + b"loss |" + b" " * 2**19 + b"1.5 |\n")
        f.write(b"| step | 3 |\n")
    code = ("import sys, json; from ml_skills.engine.pipeline import DiagnoseRequest, diagnose; "
            "d = diagnose(DiagnoseRequest(target=sys.argv[1])); print(json.dumps([s.name for s in d.trajectory]))")
    done = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == ["loss"]  # the one well-formed block: loss 1.5 at step 3
