"""The recovery plan fits the evidence: fixes whose conditions the run contradicts are left out, every fix
cites what made it apply, contributing factors are the run's own facts, and next commands are exact.

Real logs only: corpus cases quoted from public reports, and real PyTorch runs started here through
`bash -x` (so the log holds the launch command the way a job script's trace prints it).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.plan.facts import fact, run_facts, version_below
from ml_skills.engine.read.scan import scan_log

from tests.engine import accuracy_bench

CORPUS = Path(__file__).resolve().parents[1] / "corpus"

pytest.importorskip("torch")

TRAIN = textwrap.dedent('''
    import argparse, math, torch
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--precision", default="32")
    p.add_argument("--max-grad-norm", type=float, default=0.0)
    p.add_argument("--warmup-steps", type=int, default=0)
    a = p.parse_args()
    print(a, flush=True)
    torch.manual_seed(0)
    x = torch.randn(256, 16); y = x @ torch.randn(16, 1) * 10
    m = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(m.parameters(), lr=a.lr)
    for step in range(1, 201):
        loss = torch.nn.functional.mse_loss(m(x), y)
        opt.zero_grad(); loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(m.parameters(), a.max_grad_norm if a.max_grad_norm > 0 else float("inf"))
        opt.step()
        print(f"step {step} | loss {loss.item():.4f} | grad_norm {gn.item():.4f} | lr {a.lr}", flush=True)
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"Loss became infinite or NaN at iteration={step}!")
''')


def _run(tmp_path: Path, args: str) -> Path:
    """Run the script under `bash -x`, as a job script would, and keep everything it printed."""
    (tmp_path / "train.py").write_text(TRAIN)
    log = tmp_path / "train.log"
    with log.open("w") as out:
        subprocess.run(["bash", "-xc", f"{sys.executable} train.py {args}"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                       timeout=300, check=False)
    return log


@pytest.mark.slow
def test_an_fp32_run_without_clipping_gets_clipping_not_bf16_and_an_exact_lower_lr_command(tmp_path):
    log = _run(tmp_path, "--lr 0.5 --precision 32 --max-grad-norm 0")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    facts = {f.name: f for f in d.facts}
    assert facts["precision"].value == "fp32" and facts["grad_clipping"].value == "off" and facts["learning_rate"].value == "0.5"
    ids = [f.fix_id for f in d.fixes]
    assert "bf16-or-loss-scaling" not in ids, "bf16/fp16 advice for an fp32 run"
    assert "grad-clipping" in ids
    assert all(f.because for f in d.fixes), "every fix names what made it apply"
    assert any(c.startswith("no gradient clipping") for c in d.root_cause.contributing)
    lower = [c for c in d.next_commands if "train.py" in c and "--lr" in c]
    assert lower and "--lr 0.167" in lower[0] and "--max-grad-norm 0" in lower[0], d.next_commands


@pytest.mark.slow
def test_a_run_already_clipping_in_fp16_gets_no_clipping_advice_but_loss_scaling(tmp_path):
    log = _run(tmp_path, "--lr 0.5 --precision 16-mixed --max-grad-norm 1e9")
    d = diagnose(DiagnoseRequest(target=str(log)))
    facts = {f.name: f.value for f in d.facts}
    assert facts["precision"] == "fp16" and facts["grad_clipping"] == "on"
    ids = [f.fix_id for f in d.fixes]
    assert "grad-clipping" not in ids and "bf16-or-loss-scaling" in ids


def test_a_shape_mismatch_gets_no_disk_or_output_fixes():
    for case in ("015-yolov7-resume-size-mismatch", "016-spin-resnet-size-mismatch"):
        d = diagnose(DiagnoseRequest(target=str(CORPUS / case / "train.log")))
        ids = {f.fix_id for f in d.fixes}
        assert not ids & {"free-space-or-keep-fewer", "writable-output-dir", "fix-call-signature"}, (case, ids)


def test_expandable_segments_only_when_reserved_memory_is_not_in_use():
    # 005: 14.37 GiB allocated, 15.03 GiB reserved: 0.66 GiB to recover at most
    d = diagnose(DiagnoseRequest(target=str(CORPUS / "005-yolov3-cuda-oom-compute-loss" / "train.log")))
    assert d.primary_cause is not None and d.primary_cause.value == "oom"
    assert "expandable-segments" not in {f.fix_id for f in d.fixes}
    # 124: 4.68 GiB allocated, 7.85 GiB reserved: fragmentation is worth recovering
    d = diagnose(DiagnoseRequest(target=str(CORPUS / "124-czsl-oom-in-evaluate-predictions" / "train.log")))
    assert "eval-batch-size" in {f.fix_id for f in d.fixes}, "this OOM is in evaluate_predictions"


def test_eval_batch_size_only_for_an_oom_during_evaluation():
    d = diagnose(DiagnoseRequest(target=str(CORPUS / "005-yolov3-cuda-oom-compute-loss" / "train.log")))
    assert "eval-batch-size" not in {f.fix_id for f in d.fixes}


@pytest.mark.parametrize("case, expect", [
    ("031-locating-objects-unrecognized-env-name", r"^python train\.py --help"),
    ("008-sagemaker-processing-instance-limit", r"^aws service-quotas list-service-quotas --service-code sagemaker .*Number of instances"),
    ("078-dolly-torch-save-errno28-disk-full", r"^df -h "),
    ("018-nnunet-no-kernel-image", r"torch\.cuda\.get_arch_list\(\)"),
])
def test_next_commands_are_filled_in_from_the_evidence(case, expect):
    log = next(CORPUS.glob(f"{case.split('-')[0]}-*/train.log"))
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert any(re.search(expect, c) for c in d.next_commands), d.next_commands


def test_no_report_on_the_corpus_has_a_placeholder_command():
    corpus = [r for r in accuracy_bench.load().run_all(lab=Path("/nonexistent")) if r.suite == "corpus"]
    assert len(corpus) > 300
    for r in corpus:
        bad = [c for c in r.commands + r.fix_commands if re.search(r"<[A-Za-z][\w ]*>", c)]
        assert not bad, (r.name, bad)


def test_facts_are_read_from_the_lines_runs_print():
    lightning = scan_log(next(CORPUS.glob("352-*/train.log")))
    prec = fact(run_facts([lightning]), "precision")
    assert prec is not None and prec.value == "fp16" and "Automatic Mixed Precision" in prec.text
    hf = scan_log(next(CORPUS.glob("284-*/train.log")))
    facts = run_facts([hf])
    assert fact(facts, "grad_accumulation").value == "4"  # type: ignore[union-attr]
    assert fact(facts, "dataset_size").value == "Num examples = 28,483"  # type: ignore[union-attr]
    lit = scan_log(next(CORPUS.glob("155-*/train.log")))
    saves = [f for f in run_facts([lit]) if f.name == "checkpoint_saved"]
    assert saves and saves[-1].value.startswith("checkpoints/epoch=") and "(step" in saves[-1].value


def test_version_comparison():
    assert version_below("2.0.1+cu118", "2.1") and not version_below("2.1.0", "2.1") and not version_below("2.13.0+cpu", "2.1")
