"""Runs that end with no error line, only numbers that say the run is useless or finished.

- A COCO evaluation table whose every AP is near zero (0.002 when the predictions are counted under the wrong
  category: pycocotools prints -1.000 for areas with no ground truth, which is no score) is evaluation-mismatch;
  the same table with the predictions under the right category is not flagged. Real pycocotools runs.
- A trainer's metric dict whose model outputs (DPO's log-probabilities and rewards) are NaN while its loss reads a
  number is nan-inf (corpus 790, verbatim from a public report).
- A whole-run summary ('300 epochs completed in 2.874 hours.') with no progress line parsed before it is completion
  (healthy 110, verbatim); the same shape of summary followed by an error is not.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

ROOT = Path(__file__).resolve().parents[1]

COCO = """
    import json, sys, tempfile, os
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    right = int(sys.argv[1])  # how many of the 200 images get their detection under the right category
    images = [{"id": i, "width": 640, "height": 480} for i in range(200)]
    anns = [{"id": i + 1, "image_id": i, "category_id": 1, "bbox": [100, 100, 200, 150], "area": 30000, "iscrowd": 0}
            for i in range(200)]
    gt = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}, {"id": 2, "name": "bicycle"}]}
    path = os.path.join(tempfile.mkdtemp(), "gt.json")
    json.dump(gt, open(path, "w"))
    print("loading annotations into memory...", flush=True)
    coco = COCO(path)
    dets = [{"image_id": i, "category_id": 1 if i < right else 2, "bbox": [102, 101, 198, 150], "score": 0.9}
            for i in range(200)]
    ev = COCOeval(coco, coco.loadRes(dets), "bbox")
    ev.evaluate(); ev.accumulate(); ev.summarize()
"""


def _coco_log(tmp_path: Path, right: int) -> Path:
    pytest.importorskip("pycocotools")
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(COCO), str(right)], capture_output=True, text=True,
                         timeout=120, check=True)
    log = tmp_path / f"test_{right}.log"
    log.write_text(out.stdout)
    return log


def test_coco_table_near_zero_is_evaluation_mismatch(tmp_path: Path) -> None:
    log = _coco_log(tmp_path, right=1)
    text = log.read_text()
    assert "-1.000" in text and "= 0.00" in text  # the real table: areas with no ground truth, an AP of about 0
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch"
    assert d.run_status.value == "degraded"


def test_coco_table_with_right_categories_is_not_flagged(tmp_path: Path) -> None:
    log = _coco_log(tmp_path, right=200)
    assert "= 1.000" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None


def test_nan_model_outputs_beside_a_numeric_loss_are_nan_inf() -> None:
    log = next((ROOT / "corpus").glob("790-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    first = next(i for i, x in enumerate(log.read_text().splitlines(), 1) if "'rewards/chosen': nan" in x)
    assert any(e.line_no == first for e in d.evidence)


def test_run_summary_with_no_progress_line_is_completion(tmp_path: Path) -> None:
    log = next((ROOT / "healthy").glob("110-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value == "completed" and d.primary_cause is None
    # the same log with a real error appended after its summary: the summary no longer ends the run
    crashed = tmp_path / "train.log"
    err = subprocess.run([sys.executable, "-c", "open('/nonexistent/weights/best.pt', 'rb')"], capture_output=True, text=True, check=False)
    crashed.write_text(log.read_text() + err.stderr)
    assert "FileNotFoundError" in err.stderr
    d = diagnose(DiagnoseRequest(target=str(crashed)))
    assert d.run_status.value != "completed"
