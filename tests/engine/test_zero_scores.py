"""Degraded runs read from a summary whose every AP/mAP/BLEU is exactly 0 (issue 13, behaviour 4).

Real logs: corpus 459 (a TF Faster R-CNN on MNIST with every class's AP 0.0 and mAP 0.000000), 516 (XLM's BLEU
0.000000 on every valid/test direction at epoch 8), healthy 016 (Caffe DetectNet 'mAP = 0' after 3240 steps),
032 and 033 (YOLOX 'Training of experiment is done and the best AP is 0.00'); corpus 010 (Caffe's 'Iteration 0,
Testing net' scoring the untrained model, then killed) must not be read so. Real run: a detector whose scores
never pass its threshold, so a real AP computation gives 0 for every class. Thirteenth batch (959, abstained before):
nnU-Net's 'Average global foreground Dice: [0.0]' at epochs 99-100; a real segmenter that predicts only background
computes the same Dice of 0, and the same run with a threshold that finds the foreground does not read so.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _log(suite: str, prefix: str) -> Path:
    return next((TESTS / suite).glob(f"{prefix}-*")) / "train.log"


@pytest.mark.parametrize(("suite", "case"), [("corpus", "459"), ("corpus", "516"), ("corpus", "959")])
def test_every_score_zero_in_the_summary_is_an_evaluation_mismatch(suite, case):
    d = diagnose(DiagnoseRequest(target=str(_log(suite, case))))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.root_cause
    assert d.run_status.value == "degraded"


def test_every_score_zero_beside_a_box_loss_at_zero_is_the_labels_never_seen_healthy_016():
    """DetectNet's mAP 0 with loss_bbox exactly 0 at every log: the box loss says why (no ground-truth box reaches the
    heads: the thread's 'labels the net never sees'), so the class is the data's (batch 31's box-loss reading)."""
    d = diagnose(DiagnoseRequest(target=str(_log("healthy", "016"))))
    assert d.primary_cause is not None and d.primary_cause.value == "data-pipeline", d.root_cause
    assert d.run_status.value == "degraded"


@pytest.mark.parametrize("case", ["032", "033", "046"])  # 046: YOLOv5 printing the dict {'bbox AP': 0.0}
def test_a_finished_run_whose_best_ap_is_zero_finished_degraded(case):
    d = diagnose(DiagnoseRequest(target=str(_log("healthy", case))))
    assert d.run_status.value == "degraded"


def test_an_evaluation_of_the_untrained_model_at_iteration_0_is_not_read_corpus_010():
    d = diagnose(DiagnoseRequest(target=str(_log("corpus", "010"))))
    assert d.primary_cause is None or d.primary_cause.value != "evaluation-mismatch", d.root_cause


DETECTOR = """
    import torch
    torch.manual_seed(0)
    n, classes = 64, 3
    feats = torch.randn(n, 8); labels = torch.randint(0, classes, (n,))
    head = torch.nn.Linear(8, classes)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    for step in range(1, 31):
        loss = torch.nn.functional.cross_entropy(head(feats), labels)
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    scores = torch.sigmoid(head(feats)).detach()
    keep = scores > 0.99  # a confidence threshold no prediction reaches: no detections at all
    aps = []
    for c in range(classes):
        hits = keep[:, c] & (labels == c)
        tp = hits.sum().item(); npos = (labels == c).sum().item()
        ap = 0.0 if tp == 0 else tp / max(1, keep[:, c].sum().item()) * tp / npos
        aps.append(ap)
        print(f"Average Precision for class {c}: {ap}", flush=True)
    print(f"Mean Average Precision on VALID Set: {sum(aps) / classes:.6f}", flush=True)
"""


def test_a_real_detector_with_no_detections_finished_degraded(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(DETECTOR))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=True)
    assert "Mean Average Precision on VALID Set: 0.000000" in log.read_text(), log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.root_cause
    assert d.run_status.value == "degraded"


def test_a_yolo_validation_over_images_with_no_labels_is_an_evaluation_mismatch_corpus_619():
    """YOLOv5's test.py: 'all 29 0 0 0 0 0' - 29 images, 0 labels, every score 0 (the split's labels were not found)."""
    d = diagnose(DiagnoseRequest(target=str(_log("corpus", "619"))))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.root_cause
    assert "0 labels" in d.root_cause.proximate


@pytest.mark.parametrize("case", ["652", "654"])
def test_bleu_zero_in_any_tools_format_is_an_evaluation_mismatch(case):
    """multi-bleu.perl's 'BLEU = 0.00, 32.2/2.9/0.8/0.0 (BP=0.005, ...)' (652) and a loop's '... BLEU 0.00, <date>' (654)."""
    d = diagnose(DiagnoseRequest(target=str(_log("corpus", case))))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.root_cause


SEGMENTER = """
    import sys, torch
    torch.manual_seed(0)
    x = torch.rand(64, 1, 16, 16); y = (x > 0.7).float()
    net = torch.nn.Conv2d(1, 1, 3, padding=1)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    threshold = float(sys.argv[1])
    for epoch in range(1, 4):
        for _ in range(100):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            pred = (torch.sigmoid(net(x)) > threshold).float()
        dice = (2 * (pred * y).sum() / (pred.sum() + y.sum())).item()
        print(f"epoch {epoch} train loss : {loss.item():.4f}")
        print(f"Average global foreground Dice: {[round(dice, 4)]}")
"""


@pytest.mark.parametrize(("threshold", "zero"), [(1.1, True), (0.5, False)])
def test_a_real_segmenter_whose_dice_is_zero_is_degraded(tmp_path, threshold, zero):
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(SEGMENTER), str(threshold)], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert ("Dice: [0.0]" in out.splitlines()[-1]) is zero, out
    log = tmp_path / "train.log"
    log.write_text(out)
    d = diagnose(DiagnoseRequest(target=str(log)))
    named = d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch"
    assert named is zero, (d.primary_cause, out)
