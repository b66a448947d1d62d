"""A log that lost the error that ended its run (issue 13: the decisive line is not the last one).

A paste or a killed collector often stops inside the final traceback, before its exception line. The nearest account
of that error is then the last failure line the run logged as a warning with no training after it: fairseq's 'OOM:
Ran out of memory ... attempting to recover from OOM' before the spawn traceback (corpus 1212), PyTorch's 'None of the
inputs have requires_grad=True' before the trainer's (corpus 1224). It is named, with the capped confidence of a
verdict resting on where a log stops; a warning that training went on past is not.

The logs are real runs of PyTorch on the CPU: reentrant gradient checkpointing over a frozen layer, whose backward
fails with 'element 0 of tensors does not require grad'. The cut copy is that log with its last line (the exception)
dropped, as the public pastes lost theirs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ml_skills.engine.analyse.stops import CONFIDENCE_CAP
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

FROZEN = """
import torch
from torch.utils.checkpoint import checkpoint
torch.manual_seed(0)
base = torch.nn.Linear(8, 8)
for p in base.parameters():
    p.requires_grad_(False)
head = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
x = torch.randn(16, 8)
for step in range({steps}):
    h = checkpoint(base, x, use_reentrant=True)  # warns: none of its inputs requires grad
    loss = (head(h) ** 2).mean() if {head} else h.sum()
    print(f"step {{step}} loss {{loss.item():.4f}}", flush=True)
    opt.zero_grad()
    loss.backward()
    opt.step()
{after}
"""


def _run(tmp_path: Path, name: str, **fmt: object) -> Path:
    script = tmp_path / f"{name}.py"
    script.write_text(FROZEN.format(**fmt))
    log = tmp_path / f"{name}.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, str(script)], stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
    return log


def _cut(log: Path) -> Path:
    lines = log.read_text().splitlines(keepends=True)
    assert "Error" in lines[-1]  # the exception line, the one a paste loses
    cut = log.with_name(log.stem + "-cut.log")
    cut.write_text("".join(lines[:-1]))
    return cut


def test_a_backward_through_a_graph_that_requires_no_grad_is_a_configuration_error_with_its_fix(tmp_path):
    log = _run(tmp_path, "frozen", steps=3, head=False, after="")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"
    assert any("requires_grad" in e.text or "does not require grad" in e.text for e in d.evidence[:3])
    assert any("enable_input_require_grads" in f.action for f in d.fixes)


def test_the_warning_before_a_traceback_the_log_lost_is_named_with_a_capped_confidence(tmp_path):
    cut = _cut(_run(tmp_path, "frozen", steps=3, head=False, after=""))
    d = diagnose(DiagnoseRequest(target=str(cut)))
    assert d.run_status.value == "crashed"
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"
    assert 0 < d.primary_cause_confidence <= CONFIDENCE_CAP
    assert d.insufficient_evidence is not None and "ends inside a traceback" in d.insufficient_evidence
    assert "None of the inputs have requires_grad" in (d.root_cause.proximate or "") + " ".join(e.text for e in d.evidence)


def test_a_warning_training_went_on_past_is_not_the_lost_error(tmp_path):
    # the same warning on every step of a run whose head trains (its loss falls), then an unrelated error cut away
    log = _run(tmp_path, "trains", steps=12, head=True, after="raise KeyError('shard_7')")
    d = diagnose(DiagnoseRequest(target=str(_cut(log))))
    assert d.primary_cause is None or d.primary_cause.value != "config-error"


def test_a_log_cut_right_after_the_traceback_header_lost_its_error_too(tmp_path):
    log = _run(tmp_path, "frozen", steps=3, head=False, after="")
    lines = log.read_text().splitlines(keepends=True)
    header = next(i for i, x in enumerate(lines) if x.startswith("Traceback (most recent call last)"))
    cut = log.with_name("header-cut.log")
    cut.write_text("".join(lines[: header + 1]))
    d = diagnose(DiagnoseRequest(target=str(cut)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"
    assert 0 < d.primary_cause_confidence <= CONFIDENCE_CAP


def test_public_logs_whose_paste_lost_the_error_after_a_warning():
    # corpus 1216 (MAX: 'UserWarning: NaN in sampled next states!', then Sacred's 'Failed after' and its traceback
    # header, where the paste ends) and 794 (fairseq: an OOM warning, then the spawn traceback cut at its header)
    root = Path(__file__).resolve().parents[1] / "corpus"
    for prefix, cls in (("1216", "nan-inf"), ("794", "oom")):
        d = diagnose(DiagnoseRequest(target=str(next(root.glob(f"{prefix}-*")) / "train.log")))
        assert d.primary_cause is not None and d.primary_cause.value == cls, prefix
