"""A log that ends on an exception line with no traceback above it still ended on that exception.

Scripts and launchers that hide tracebacks (sys.tracebacklimit = 0, a CLI that prints only the error, MXNet's
'mxnet.base.MXNetError: ...') leave the type and message alone on the last lines. A real PyTorch run with
tracebacklimit 0 whose last batch holds one sample fails in BatchNorm (corpus 655 reads the same).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")

TRAIN = """
    import sys
    sys.tracebacklimit = 0  # the script hides its tracebacks
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(33, 4), torch.randint(0, 2, (33,))
    for i in range(0, 33, 8):  # the last batch holds one sample
        loss = torch.nn.functional.cross_entropy(model(x[i:i + 8]), y[i:i + 8])
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"step {i // 8} loss {loss.item():.4f}", flush=True)
"""


def test_an_exception_line_alone_at_the_end_is_the_terminal_event(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        r = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                           timeout=120, check=False)
    text = log.read_text()
    assert r.returncode == 1 and "Traceback" not in text and text.rstrip().splitlines()[-1].startswith("ValueError: "), text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", (d.primary_cause, text)
    assert d.run_status.value == "crashed"
    assert "Expected more than 1 value per channel" in d.root_cause.proximate
