"""Two ends of a run that no English completion line says (healthy 738 and 744, open since batch 40):

- Chinese scripts close with '训练完成' or '训练结束' (training complete, training over): the run ended, even with a
  test metric of nan printed before it (738, a BERT classifier whose test set evaluates to nan, was 'unknown');
- a log of repeated launches of one script, each run going through its epochs and the counter starting over: when every
  earlier run that got going stopped on the same epoch, the last run reaching that epoch has reached its configured end
  (744, eight runs of 20 epochs appended to one file, was 'running'); a last run short of it, or earlier runs that
  disagree, say nothing.

Real CPU runs, appended to one log as a logging file handler does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.engine.batchcase import case, run_script, verdict

_CLOSING = """
    import logging, math, torch
    logging.basicConfig(format="%(asctime)s - MedicalClassifier - %(levelname)s - %(message)s", level=logging.INFO)
    log = logging.getLogger()
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 4); y = (x.sum(1) > 0).long()
    for epoch in range(1, 4):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        log.info(f"Epoch {epoch}, Batch 100, Loss: {loss.item():.4f}")
        log.info(f"Epoch {epoch} - Validation Accuracy: {(model(x).argmax(1) == y).float().mean():.4f}")
    log.info("在测试集上评估...")
    empty = torch.empty(0)
    log.info(f"测试集准确率: {empty.float().mean().item():.4f}")  # an empty test set: nan
    log.info("保存模型...")
    log.info("训练完成")
"""


def test_a_chinese_closing_line_completes_the_run_and_the_log_without_it_does_not(tmp_path):
    log = run_script(tmp_path, _CLOSING)
    text = log.read_text(encoding="utf-8")
    assert "训练完成" in text and "nan" in text
    assert verdict(log) == (None, "completed")
    cut = tmp_path / "cut.log"
    cut.write_text(text[: text.index("在测试集上评估")].rsplit("\n", 1)[0] + "\n", encoding="utf-8")
    assert verdict(cut)[1] != "completed"


def test_the_committed_chinese_log_is_completed():
    assert verdict(case("738", "healthy")) == (None, "completed")


_EPOCHS = """
    import logging, sys, torch
    logging.basicConfig(filename="train.log", format="%(asctime)s - %(levelname)s - %(message)s", level=logging.INFO)
    log = logging.getLogger()
    torch.manual_seed(int(sys.argv[2]))
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 4); y = x.sum(1, keepdim=True)
    log.info("view1: 64 samples, view2: 64 samples")
    for epoch in range(1, int(sys.argv[1]) + 1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        log.info(f"Epoch: {epoch}, Avg_loss: {loss.item():.3f}, Duration: 0.01s")
"""


def _launches(tmp_path: Path, epochs: list[int]) -> Path:
    """The script launched once per entry, each run of that many epochs, all appending to one train.log."""
    (tmp_path / "train.py").write_text(__import__("textwrap").dedent(_EPOCHS), encoding="utf-8")
    for seed, n in enumerate(epochs):
        subprocess.run([sys.executable, "train.py", str(n), str(seed)], cwd=tmp_path, check=True, timeout=300,
                       env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    return tmp_path / "train.log"


def test_a_last_run_ending_where_every_earlier_run_ended_is_completed(tmp_path):
    assert verdict(_launches(tmp_path, [12, 12, 12])) == (None, "completed")


def test_a_last_run_short_of_the_earlier_runs_end_is_not(tmp_path):
    assert verdict(_launches(tmp_path, [12, 12, 7]))[1] != "completed"


def test_earlier_runs_that_ended_on_different_epochs_say_nothing(tmp_path):
    assert verdict(_launches(tmp_path, [9, 12, 12]))[1] != "completed"


def test_the_committed_log_of_eight_runs_is_completed():
    assert verdict(case("744", "healthy")) == (None, "completed")
