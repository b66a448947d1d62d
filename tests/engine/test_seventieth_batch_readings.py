"""Batches 70-73's misses read as general behaviours (scored at e35401c before any change):

- a check that one setting divides another ('Batch size (1) is not divisible by the number of devices (4)') is the
  run's configuration wherever it is raised: 2153 read data-pipeline because the check sat in a Lightning datamodule's
  setup, whose frames the data-loading rule names, though no sample was read;
- a JSON log's quoted whole-run ETA reaching zero ('"eta": "00:00:00"' beside '"progress_pct": 100.0') is the run's
  end as much as mmcv's 'eta: 0:00:00' (0948, a recommender's 3-epoch run, read running);
- (batch 73) an RL loop's environment steps at their total ('T = 10000000 / 10000000', Rainbow's line) end the run as
  'step 1000/1000' does (0960, read running).

The runs are real PyTorch loops; each has a control that must not move."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.engine.batchcase import case, run_script, verdict

_DATAMODULE = """
    import torch

    class TrainDataModule:
        def __init__(self, batch_size, devices):
            self.batch_size, self.devices = batch_size, devices

        def setup(self):
            if self.batch_size % self.devices:
                raise RuntimeError(
                    f"Batch size ({self.batch_size}) is not divisible by the number of devices ({self.devices}).")
            self.data = torch.randn(64, 8)

        def __getitem__(self, i):
            if i == 8:
                raise RuntimeError(f"sample {i}: could not decode the stored tensor (bad header)")
            return self.data[i]
"""

_SETUP = """
    import sys, torch
    from datasets.train_datamodule import TrainDataModule
    dm = TrainDataModule(batch_size=int(sys.argv[1]), devices=4)
    dm.setup()
    model = torch.nn.Linear(8, 1)
    for step in range(10):
        x = torch.stack([dm[i] for i in range(step, step + 4)])
        loss = model(x).pow(2).mean()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
"""


def _with_datamodule(tmp_path: Path) -> None:
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "train_datamodule.py").write_text(textwrap.dedent(_DATAMODULE), encoding="utf-8")


def test_a_size_that_does_not_divide_the_devices_is_configuration_wherever_it_is_checked(tmp_path: Path):
    _with_datamodule(tmp_path)
    log = run_script(tmp_path, _SETUP, "1")
    text = log.read_text()
    assert "datasets/train_datamodule.py" in text and "is not divisible by the number of devices (4)" in text
    assert verdict(log) == ("config-error", "crashed")
    assert verdict(case("2153"))[0] == "config-error"


def test_a_sample_that_fails_to_decode_in_the_same_module_stays_a_data_fault(tmp_path: Path):
    _with_datamodule(tmp_path)
    log = run_script(tmp_path, _SETUP, "4")
    text = log.read_text()
    assert "step 0 loss" in text and "could not decode" in text and "in __getitem__" in text
    assert verdict(log)[0] == "data-pipeline"


_JSON_LOOP = """
    import json, sys, time, torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    total, stop, t0 = 21, int(sys.argv[1]), time.time()
    for step in range(total):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        time.sleep(0.2)  # an ETA in whole seconds: more than one left until the last steps
        left = (time.time() - t0) / (step + 1) * (total - step - 1)
        print(json.dumps({"global_step": step, "loss": loss.item(), "epoch": step // 7 + 1, "time": time.time(),
                          "eta": time.strftime("%H:%M:%S", time.gmtime(left)),
                          "progress_pct": round(100 * (step + 1) / total, 2)}), flush=True)
        if step + 1 == stop:
            break
"""


def test_a_json_logs_whole_run_eta_reaching_zero_is_the_runs_end(tmp_path: Path):
    log = run_script(tmp_path, _JSON_LOOP, "21")
    assert log.read_text().splitlines()[-1].endswith('"eta": "00:00:00", "progress_pct": 100.0}')
    assert verdict(log) == (None, "completed")
    assert verdict(case("0948", "healthy")) == (None, "completed")


def test_a_json_log_cut_with_time_left_is_no_end(tmp_path: Path):
    log = run_script(tmp_path, _JSON_LOOP, "11")
    assert '"progress_pct": 52.38' in log.read_text().splitlines()[-1]
    assert verdict(log)[1] != "completed"


_RL_LOOP = """
    import sys, torch
    torch.manual_seed(0)
    q = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(q.parameters(), lr=1e-2)
    total, stop = 2000, int(sys.argv[1])
    for t in range(1, total + 1):
        s = torch.randn(32, 4)
        target = s[:, :2].sum(1, keepdim=True).expand(-1, 2)
        loss = torch.nn.functional.smooth_l1_loss(q(s), target)
        opt.zero_grad(); loss.backward(); opt.step()
        if t % 250 == 0:  # Rainbow's line: environment steps out of the run's total
            print(f"[2023-05-28T23:49:{t // 250:02d}] T = {t} / {total} | Avg. reward: {-loss.item():.1f} | "
                  f"Avg. Q: {q(s).mean().item():.4f}", flush=True)
        if t == stop:
            break
"""


def test_an_rl_loops_environment_steps_at_their_total_end_the_run(tmp_path: Path):
    log = run_script(tmp_path, _RL_LOOP, "2000")
    assert "T = 2000 / 2000" in log.read_text().splitlines()[-1]
    assert verdict(log) == (None, "completed")
    assert verdict(case("0960", "healthy")) == (None, "completed")


def test_an_rl_loop_cut_before_its_total_has_not_ended(tmp_path: Path):
    log = run_script(tmp_path, _RL_LOOP, "1000")
    assert "T = 1000 / 2000" in log.read_text().splitlines()[-1]
    assert verdict(log)[1] != "completed"
