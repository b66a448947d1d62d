"""Attempts appended to one log (issue 13, behaviour 7): a failed first attempt, then a retry that ran clean.

Real log: healthy 006 (a Hydra InstantiationException on the first attempt; the second attempt prints the same
start-up lines, trains, tests and closes its loggers). Real run: a shell retries a PyTorch script whose first
attempt fails on a bad keyword argument, appending both attempts to one log.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

HEALTHY = Path(__file__).resolve().parents[1] / "healthy"


def test_a_clean_retry_after_a_config_error_is_recovered_healthy_006():
    d = diagnose(DiagnoseRequest(target=str(next(HEALTHY.glob("006-*")) / "train.log")))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value in ("recovered", "completed")


SCRIPT = """
    import logging, sys
    import torch
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    log = logging.getLogger("__main__")
    log.info("Instantiating model <torch.nn.Linear> with hidden size from the config")
    kwargs = {"in_features": 4, "out_features": 1}
    if sys.argv[1] == "bad":
        kwargs["lin1_size"] = 64
    model = torch.nn.Linear(**kwargs)
    log.info("Starting training!")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 4); y = x.sum(1, keepdim=True)
    for it in range(5):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()  # a progress bar on the terminal, not in the log (as in 006)
    log.info("Closing loggers...")
"""


def test_a_real_retry_appended_after_a_failed_attempt_is_not_a_failure(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run(["bash", "-c", f"{sys.executable} train.py bad; {sys.executable} train.py good"], cwd=tmp_path,
                       stdout=out, stderr=subprocess.STDOUT, timeout=180, check=True)
    text = log.read_text()
    assert "unexpected keyword argument 'lin1_size'" in text and text.count("Instantiating model") == 2, text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value in ("recovered", "completed")


def test_a_retry_that_fails_again_still_names_the_failure(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run(["bash", "-c", f"{sys.executable} train.py bad; {sys.executable} train.py bad"], cwd=tmp_path,
                       stdout=out, stderr=subprocess.STDOUT, timeout=180, check=False)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.root_cause
    assert d.run_status.value == "crashed"
