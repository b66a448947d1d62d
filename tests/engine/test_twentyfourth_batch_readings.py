"""General readings written after issue 13's twenty-fourth prospective batch was scored: a missing file under the run's
data folder is a data path, whatever call read it (1372: torch.load of '.../train/train/edge_index.pt'); a loss named
for its network on a training record is the run's loss when it is the only such term (1386: 'loss_net: nan'); the
Ascend NPU's kernel failures and MindSpore's dataset-pipeline exception (1393, 1390). Real runs where the shape can run
here (torch.load of a missing file, a PyTorch loop whose loss goes NaN), the verbatim public log of the case otherwise,
with controls that must not change."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.analyse import chance
from ml_skills.engine.read.metrics import parse_line
from ml_skills.models import MetricPoint

from tests.engine.batchcase import case, verdict


def _run(tmp_path: Path, code: str, *args: str) -> Path:
    (tmp_path / "train.py").write_text(textwrap.dedent(code), encoding="utf-8")
    log = tmp_path / "train.err"
    with log.open("w") as out:
        subprocess.run([sys.executable, "train.py", *args], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
                       check=False, timeout=300, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    return log


_LOAD = """
    import logging, os, sys, torch
    logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(message)s")
    logging.info("Using device: cpu")
    which = sys.argv[1]
    if which == "data":
        root = "data/preprocessed/adv_feat/mi0_top15/train"
        train_dir = os.path.join(root, "train")  # the split root given as the train folder: one level too deep
        logging.info(f"Using split-based workflow with directories: {train_dir}")
        edge_index = torch.load(os.path.join(train_dir, "edge_index.pt"))
    else:
        state = torch.load(os.path.join("checkpoints", "model_best.pt"))
"""


@pytest.mark.parametrize(("which", "expected"), [("data", "data-pipeline"), ("checkpoint", "io-checkpoint")])
def test_a_missing_file_is_read_by_what_its_path_names(tmp_path: Path, which: str, expected: str):
    (tmp_path / "data" / "preprocessed" / "adv_feat" / "mi0_top15" / "train").mkdir(parents=True)
    log = _run(tmp_path, _LOAD, which)
    assert "FileNotFoundError" in log.read_text() and "torch/serialization.py" in log.read_text()
    assert verdict(log) == (expected, "crashed")


def test_the_batchs_data_path_case():
    assert verdict(case("1372"))[0] == "data-pipeline"


_NAN_LOOP = """
    import sys, torch
    torch.manual_seed(0)
    lr = float(sys.argv[1])
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    x = torch.randn(512, 8); y = x.sum(1, keepdim=True) * 3
    scale = 32768.0
    for it in range(0, 1201):
        i = (it * 32) % 512
        loss_net = ((net(x[i:i + 32]) - y[i:i + 32]) ** 2).mean()
        opt.zero_grad(); loss_net.backward()
        norm = torch.nn.utils.clip_grad_norm_(net.parameters(), float("inf"))
        if not torch.isfinite(norm):
            scale = max(1.0, scale / 2)
        opt.step()
        if it % 100 == 0:
            print(f"02:29:53: train iter: {it} loss_net: {loss_net.item():.4f} loss_scale: {scale:.4f} norm: {norm.item():.4f}", flush=True)
"""


@pytest.mark.parametrize(("lr", "nan"), [("0.5", True), ("0.001", False)])
def test_a_loss_named_for_its_network_is_the_runs_loss(tmp_path: Path, lr: str, nan: bool):
    log = _run(tmp_path, _NAN_LOOP, lr)
    printed = [x for x in log.read_text().splitlines() if "loss_net:" in x]
    assert len(printed) == 13 and ("loss_net: nan" in "\n".join(printed)) is nan
    cls, _status = verdict(log)
    assert cls == ("nan-inf" if nan else None)
    assert verdict(case("1386")) == ("nan-inf", "diverged")  # VerSe2020: loss_net nan at iter 100


def test_a_loss_term_is_not_the_loss_beside_a_total_or_other_terms_or_alone():
    mmdet = ("2025-11-08 03:16:43,253 - mmdet - INFO - Epoch [10][2800/3143]\tlr: 2.500e-03, loss_rpn_cls: 0.2310, "
             "loss_rpn_bbox: 0.0267, loss_cls: 0.1565, acc: 99.0000, loss_bbox: 0.1935, loss: 0.6078")
    assert parse_line(mmdet)[0]["loss"] == pytest.approx(0.6078)  # its total, not a term
    got = parse_line("Epoch [10][3100/3143]\tlr: 2.500e-03, loss_rpn_cls: 0.2294, loss_bbox: 0.1955")
    assert got is not None and "loss" not in got[0]  # two terms and no total: no one loss
    assert parse_line(" >>> loss_cls: 0.085850") is None  # a term on a line of its own (tf-faster-rcnn, corpus 1314)
    got = parse_line("Train_loss: 46.05170378351126, Val_los: nan, Min_val_loss: 10000000000.0, epoch: 16")
    assert got is not None and got[0].get("loss") == pytest.approx(46.05170378351126)  # a summary's minimum is no loss


def test_ascend_and_minddata_failures_name_their_class():
    assert verdict(case("1393")) == ("cuda-runtime", "crashed")  # AICPU exception in a backward Reshape kernel
    assert verdict(case("1390")) == ("data-pipeline", "crashed")  # minddata's 'Exception thrown from dataset pipeline'


def test_a_loss_at_or_below_zero_among_the_last_logs_is_no_uniform_guess():
    # an RL or GAN loss is negative at times; one among the logs read for ln C raised a math domain error
    values = [-0.0123456, 0.693147, 0.693147, 0.693147, 0.693147]
    points = [MetricPoint(source="train.log", line_no=i + 1, step=float(i), values={"loss": v}) for i, v in enumerate(values)]
    chance.loss_collapsed(points)  # no exception
