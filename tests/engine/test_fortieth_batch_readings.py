"""Batch 40's misses, read as general behaviours (docs/accuracy.md, batch 40; scored at 13c1304 before any change):

- binary_cross_entropy's range check (the CUDA kernel's 'Assertion `input_val >= zero && input_val <= one` failed', the
  CPU's 'all elements of input should be between 0 and 1') says the loss got a value outside [0, 1]: after steps trained,
  a NaN reached it (1707: 'grad_norm was NaN!', one step, then the assertion; it was read as an index out of range,
  cuda-runtime); in a log that shows the run's start and no progress, the model hands it logits (config-error); a paste
  that starts at the assertion (1709) says nothing of the steps before it. Real CPU runs of both.
- 'grad_norm was NaN!' (a loop's own guard, in prose) is a non-finite gradient, like 'loss is nan'.
- insightface's MXNet metric 'lossvalue=nan' is the loss, and MXNet's Speedometer 'Epoch[0] Batch [41940-41960]' is where
  the epoch stands: a NaN there is not 'within the first 100 steps' (1710 abstained).
- frames of the launcher's own modules (torch/distributed/launch.py, run.py, elastic/, launcher/) wait on and kill
  workers: a traceback cut inside them is no collective's exception (1713, four workers killed loading a large JSON,
  read as nccl-distributed).
"""

from __future__ import annotations

import re

from ml_skills.catalog.loader import exception_rules
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.read.counters import epoch_iteration

from tests.engine.batchcase import case, run_script, verdict

_BCE = """
    import sys, torch
    torch.manual_seed(0)
    x = torch.randn(2048, 8); y = (x[:, 0] > 0).float().unsqueeze(1)
    print(f"loaded {len(x)} samples, 8 features; model Linear(8 -> 1), SGD lr 0.1, 300 steps", flush=True)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, 301):
        i = (step * 32) % 2048
        xb = x[i:i + 32].clone()
        if sys.argv[1] == "nan" and step == 180:
            xb[3, 2] = float("inf")  # one corrupt sample late in the run
        out = model(xb)
        prob = torch.sigmoid(out) if sys.argv[1] == "nan" else out  # 'logits': the sigmoid forgotten
        loss = torch.nn.functional.binary_cross_entropy(prob, y[i:i + 32])
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 10 == 0:
            print(f"step {step}/300 loss {loss.item():.4f}", flush=True)
"""


def test_bce_out_of_range_after_training_is_a_nan_and_at_the_first_step_is_the_setup(tmp_path):
    (tmp_path / "late").mkdir(); (tmp_path / "first").mkdir()
    late = run_script(tmp_path / "late", _BCE, "nan")
    text = late.read_text()
    assert "step 170/300" in text and "all elements of input should be between 0 and 1" in text
    assert verdict(late) == ("nan-inf", "crashed")
    first = run_script(tmp_path / "first", _BCE, "logits")
    assert "step 10/300" not in first.read_text()
    assert verdict(first) == ("config-error", "crashed")


def test_the_kernel_assertion_after_a_nan_guard_is_nan_inf():
    d = diagnose(DiagnoseRequest(target=str(case("1707"))))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf" and d.run_status.value == "crashed"
    text = "\n".join(e.model_dump_json() for e in d.evidence)
    assert "bce-input-out-of-range" in text and "device-side-assert" not in text, text
    assert "grad_norm was NaN!" in text  # the guard's line is evidence too
    assert verdict(case("1709"))[0] == "nan-inf"  # a paste of kernel assertions alone: no start, so no first-step reading


def test_mxnet_lossvalue_and_speedometer_counters_place_the_nan():
    line = "INFO:root:Epoch[0] Batch [41940-41960]  Speed: 205.71 samples/sec       acc=0.942578    lossvalue=nan"
    assert epoch_iteration(line) == (0.0, 41960.0, None)
    assert epoch_iteration("Epoch[3] Batch [200]\tSpeed: 1843.21 samples/sec\taccuracy=0.51") == (3.0, 200.0, None)
    assert epoch_iteration("Epoch[3] Train-accuracy=0.925") is None
    d = diagnose(DiagnoseRequest(target=str(case("1710"))))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    onset = next(a for a in d.anomalies if a.kind.value == "nan-onset")
    assert "iteration 41960" in onset.detail and "first 100 steps" not in onset.detail, onset.detail


def test_a_traceback_cut_in_the_launchers_own_frames_is_no_collective():
    rule = next(r for r in exception_rules() if r.id == "exception-in-collective")
    frames = re.compile(rule.frames or "")
    launcher = ['  File "/usr/lib/python3.8/site-packages/torch/distributed/launch.py", line 301, in sigkill_handler',
                '  File "/opt/py/site-packages/torch/distributed/run.py", line 1019, in run',
                '  File "/opt/py/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent',
                '  File "/opt/py/site-packages/torch/distributed/elastic/agent/server/api.py", line 711, in run']
    assert not any(frames.search(f) for f in launcher)
    assert frames.search('  File "/opt/py/site-packages/torch/distributed/distributed_c10d.py", line 2050, in all_reduce')
    assert frames.search('  File "/opt/py/site-packages/torch/distributed/utils.py", line 280, in _sync_module_states')
    assert verdict(case("1713"))[0] != "nccl-distributed"
