"""The plan reads where the first NaN came from the finding's typed onset (models.NanOnset), never from its words:
the words quote the NaN's own log line, so a run whose lines print 'first 100 steps' or 'exploding' (an experiment's
name, a note) steered a late NaN's plan to the early-NaN fixes. Real runs on the CPU: one corrupt sample at step 250
of 400 with and without such a tag in every line give the same plan; an lr that jumps 10000x before its NaN (a StepLR
with gamma 100) is a learning-rate-jump onset and the schedule is the first fix."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.models import AnomalyKind, NanOnset

_LATE = textwrap.dedent("""
    import sys, torch
    torch.manual_seed(0)
    x = torch.randn(4096, 16); y = x @ torch.randn(16, 1)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, 401):
        i = (step * 64) % 4096
        xb = x[i:i + 64].clone()
        if step == 250:
            xb[0, 0] = float("nan")  # one corrupt sample, late in the run
        loss = torch.nn.functional.mse_loss(model(xb), y[i:i + 64])
        opt.zero_grad(); loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        opt.step()
        print(f"{sys.argv[1]}step {step}/400 | loss {loss.item():.4f} | grad_norm {gn.item():.4f}", flush=True)
""")

_JUMP = textwrap.dedent("""
    import torch
    torch.manual_seed(0)
    x = torch.randn(4096, 16) * 3; y = x @ torch.randn(16, 1)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=300, gamma=100.0)
    for step in range(1, 401):
        i = (step * 64) % 4096
        loss = torch.nn.functional.mse_loss(model(x[i:i + 64]), y[i:i + 64])
        opt.zero_grad(); loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        opt.step(); sched.step()
        print(f"step {step}/400 | loss {loss.item():.4f} | lr {opt.param_groups[0]['lr']:.3e} | grad_norm {gn.item():.4f}",
              flush=True)
""")


def _log(tmp_path: Path, name: str, script: str, *args: str) -> Path:
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300, check=True)
    log = tmp_path / name
    log.write_text(r.stdout)
    return log


def _onset(d):
    return next(a for a in d.anomalies if a.kind is AnomalyKind.NAN_ONSET)


def test_the_nan_lines_own_words_do_not_choose_the_fixes(tmp_path: Path) -> None:
    plain = diagnose(DiagnoseRequest(target=str(_log(tmp_path, "plain.log", _LATE, ""))))
    tag = "[warmup over the first 100 steps, then exploding lr sweep] "
    tagged_log = _log(tmp_path, "tagged.log", _LATE, tag)
    assert tag + "step 250/400 | loss nan" in tagged_log.read_text()
    tagged = diagnose(DiagnoseRequest(target=str(tagged_log)))
    assert _onset(plain).onset is _onset(tagged).onset is NanOnset.NO_WARNING
    assert "first 100 steps" in _onset(tagged).detail  # the line is quoted in the finding...
    assert [f.fix_id for f in tagged.fixes] == [f.fix_id for f in plain.fixes]  # ...and changes nothing it plans
    assert "find-bad-batch" in [f.fix_id for f in plain.fixes[:3]]


def test_a_nan_after_the_lr_jumped_puts_the_schedule_first(tmp_path: Path) -> None:
    d = diagnose(DiagnoseRequest(target=str(_log(tmp_path, "jump.log", _JUMP))))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    assert _onset(d).onset is NanOnset.LEARNING_RATE_JUMP, _onset(d).detail
    assert d.fixes[0].fix_id == "fix-lr-schedule", [f.fix_id for f in d.fixes]
