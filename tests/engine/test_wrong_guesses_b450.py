"""Wrong guesses on batch 450-529 (issue 13, behaviour 8), as mechanisms, on the real logs that showed them.

- 452: 'Expected all tensors to be on the same device, ... cuda:0 and cpu!' is a placement bug in the code,
  config-error, not a CUDA runtime failure (as is 'Torch not compiled with CUDA enabled', run for real here).
- 453: torch._dynamo logs each caught compile error as a traceback whose every line is prefixed '[WARNING]';
  eight of them must not outrank the LSF TERM_RUNLIMIT that ended the job.
(450, 'metric' matched inside 'torch_geometric', is in test_last_exception.py.)
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _case(prefix: str) -> Path:
    return next(CORPUS.glob(f"{prefix}-*")) / "train.log"


def test_tensors_on_two_devices_is_a_code_placement_error_corpus_452():
    d = diagnose(DiagnoseRequest(target=str(_case("452"))))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.root_cause
    assert "same device" in d.root_cause.proximate


def test_warning_level_tracebacks_yield_to_the_scheduler_kill_corpus_453():
    d = diagnose(DiagnoseRequest(target=str(_case("453"))))
    assert d.primary_cause is not None and d.primary_cause.value in ("stalled", "process-crash"), d.root_cause
    assert "TERM_RUNLIMIT" in d.root_cause.proximate
    assert d.run_status.value == "crashed"


CUDA_ON_A_CPU_BUILD = """
    import torch
    model = torch.nn.Linear(4, 1)
    print("step 0 loss 0.5", flush=True)
    model.cuda()
"""


def test_a_real_run_asking_for_cuda_on_a_cpu_build_is_config_error(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(CUDA_ON_A_CPU_BUILD))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
    text = log.read_text()
    if "Torch not compiled with CUDA enabled" not in text:
        pytest.skip("this torch build has CUDA: " + text[-200:])
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.root_cause


def test_one_process_whose_first_step_logged_its_loss_is_not_stalled_corpus_515():
    d = diagnose(DiagnoseRequest(target=str(_case("515"))))
    assert d.primary_cause is None or d.primary_cause.value != "stalled", d.root_cause


def test_a_bare_first_step_announcement_still_reads_as_a_possible_hang_corpus_359():
    d = diagnose(DiagnoseRequest(target=str(next(CORPUS.glob("359-*")) / "train.log")))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled", d.root_cause


FIRST_STEP_THEN_STOP = """
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 4)
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"Global step 0: Train loss: {loss.item():.4f}", flush=True)
"""


def test_a_real_single_process_run_stopping_after_its_first_logged_step_is_not_called_a_hang(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(FIRST_STEP_THEN_STOP))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=True)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None or d.primary_cause.value != "stalled", d.root_cause
