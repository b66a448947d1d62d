"""The terminal event decides the class: what ended the run, read from real runs.

Each log here comes from really running the failure (PyTorch on CPU, torchrun with Gloo, a shell
that reports the signal). A line the run went on from, or a trend in its metrics, must not
outrank what ended it; an exception's frames say what it was doing when it was raised.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose


def _run(tmp_path: Path, script: str, shell: str = "{py} train.py", timeout: float = 180) -> Path:
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run(["bash", "-c", shell.format(py=sys.executable)], cwd=tmp_path, stdout=out,
                       stderr=subprocess.STDOUT, timeout=timeout, check=False)
    return log


SEGFAULT_AFTER_INFO = """
    import ctypes, logging, os
    import torch
    logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(message)s")
    log = logging.getLogger("train")
    if not os.path.exists("runs/exp/last.pt"):
        log.info("No checkpoint found at runs/exp/last.pt. Initializing model from scratch")
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 8); y = x.sum(1, keepdim=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    log.info("step 0 loss %.4f", loss.item())
    ctypes.string_at(0)  # a native extension dereferencing NULL
"""


def test_an_info_line_the_run_went_on_from_does_not_outrank_the_segfault_that_ended_it(tmp_path):
    log = _run(tmp_path, SEGFAULT_AFTER_INFO, '{py} train.py; echo "exit $?"')
    text = log.read_text()
    assert "INFO - No checkpoint found" in text and "Segmentation fault" in text, text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "process-crash", d.root_cause
    assert "Segmentation fault" in d.root_cause.proximate
    assert d.run_status.value == "crashed"


TRAIN_THEN_WRITE = """
    import os
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 8); y = x.sum(1, keepdim=True)
    history = []
    for epoch in range(5):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        history.append(loss.item())
        print(f"Epoch {epoch + 1}/5 - loss: {loss.item():.4f}", flush=True)
    print("Training finished. Saving outputs", flush=True)
    WRITE
"""
WRITES = {
    "open-wb": """
    def save_curve(values, path):
        with open(path, "wb") as f:
            f.write(",".join(f"{v:.4f}" for v in values).encode())
    save_curve(history, os.path.join("results", "exp1", "loss_curve.csv"))
    """,
    "savefig": """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    def plot_history(values, out):
        plt.plot(values)
        plt.savefig(out)
    plot_history(history, "figures/run1/loss.png")
    """,
    # the output folder made with a non-recursive mkdir while its parent does not exist (corpus 569's shape)
    "mkdir": """
    folder = os.path.join("outputs", "sweep1", "run-0")
    if not os.path.exists(folder): os.mkdir(folder)
    """,
}


@pytest.mark.parametrize("how", sorted(WRITES))
def test_a_missing_directory_for_an_output_written_after_training_is_an_output_failure_not_data(tmp_path, how):
    if how == "savefig":
        pytest.importorskip("matplotlib")
    script = TRAIN_THEN_WRITE.replace("    WRITE\n", textwrap.dedent(WRITES[how]).replace("\n", "\n    "))
    log = _run(tmp_path, script)
    assert "FileNotFoundError" in log.read_text(), log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint", d.root_cause
    assert "output" in d.root_cause.root.lower()
    assert "FileNotFoundError" in d.root_cause.proximate


RANKS_ONE_KILLED = """
    import os, signal, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w = torch.randn(16, 1)
    for step in range(200):
        x = torch.randn(32, 16); y = x @ w + 0.3 * torch.randn(32, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad); p.grad /= world
        opt.step()
        print(f"rank {rank}: step {step} loss {loss.item():.4f}", flush=True)
        time.sleep(0.01)
        if rank == 1 and step == 60:
            os.kill(os.getpid(), signal.SIGKILL)  # the OOM killer, a scheduler, a person
    dist.destroy_process_group()
"""


@pytest.mark.slow
def test_interleaved_ranks_per_batch_noise_is_no_blowup_and_the_killed_rank_ends_the_run(tmp_path):
    """Four ranks print their own minibatch loss into one log; rank 1 is SIGKILLed, its peers' Gloo reads fail,
    torchrun SIGTERMs the rest. Read as one series the losses jump between ranks; each rank alone is noise."""
    log = _run(tmp_path, RANKS_ONE_KILLED, "{py} -m torch.distributed.run --nproc_per_node 4 train.py", timeout=300)
    text = log.read_text()
    # the peers' Gloo errors ('Connection reset/closed by peer') race torchrun's SIGTERMs: a loaded clean-clone CI run
    # had the launcher kill every peer before one noticed; the reading below must hold either way
    assert "SIGKILL" in text, text[-3000:]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value in ("oom", "process-crash"), d.root_cause
    assert "exitcode" in d.root_cause.proximate and "-9" in d.root_cause.proximate
    assert not any(a.kind.value == "loss-blowup" for a in d.anomalies), [a.detail for a in d.anomalies]
    assert all(c.value != "optimization-divergence" for c in d.contributing_factors)
    # the killed rank is the first to fail (the launcher's 'local_rank: 1' report), not the first peer to complain
    assert "The first rank to fail was train.log [rank1]" in d.root_cause.root, d.root_cause.root
    assert "Last progress per rank: rank 0 step " in d.root_cause.root, d.root_cause.root
    # rank 1 printed step 60 and killed itself; four ranks writing one file can glue its last lines to a peer's under
    # load (CI saw 'rank 1 step 58'): its last progress is one of its own step lines just before the kill
    shown = re.search(r"rank 1 step (\d+) ", d.root_cause.root)
    assert shown is not None and 55 <= int(shown[1]) <= 60 and f"rank 1: step {shown[1]} loss" in text, d.root_cause.root


@pytest.mark.slow
def test_when_the_launcher_tears_the_peers_down_before_they_notice_the_killed_rank_is_still_named_first(tmp_path):
    """The other side of the race above, made certain: the peers are busy (a long data step) when rank 1 is killed,
    torchrun SIGTERMs them before any collective of theirs fails, and the only rank-tagged error is the launcher's
    'local_rank: 1' report. The killed rank is still the first to fail and the others were torn down after it."""
    script = RANKS_ONE_KILLED.replace("        time.sleep(0.01)\n", "        time.sleep(0.01)\n"
                                      "        if rank != 1 and step == 60:\n            time.sleep(30)\n")
    assert script != RANKS_ONE_KILLED
    log = _run(tmp_path, script, "{py} -m torch.distributed.run --nproc_per_node 3 train.py", timeout=300)
    text = log.read_text()
    assert "SIGKILL" in text and "local_rank: 1" in text, text[-3000:]
    assert "Connection closed by peer" not in text and "Connection reset" not in text, text[-3000:]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value in ("oom", "process-crash"), d.root_cause
    assert "The first rank to fail was train.log [rank1]: its own error" in d.root_cause.root, d.root_cause.root
    assert "train.log [rank0] stopped at line" in d.root_cause.root and "after step 60" in d.root_cause.root


def test_a_grad_norm_jump_one_step_before_the_first_nan_is_cited_as_its_precursor(tmp_path):
    """The skill's worked example, run for real: the gradient explodes on one batch and the loss is inf on the next
    step. The log gives nan-inf with the jump and its numbers in the finding, and no competing divergence (the same
    training is logged to W&B and MLflow in tests/collectors, and must read the same)."""
    import io

    from tests.collectors.training import train

    out = io.StringIO()
    assert train("precursor", lambda step, values: None, out) == "failed"
    log = tmp_path / "train.log"
    log.write_text(out.getvalue())
    assert "step 60 loss" in out.getvalue() and "step 61 loss inf" in out.getvalue()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    onset = next(a for a in d.anomalies if a.kind.value == "nan-onset")
    assert "grad_norm 0.8407 -> 64910 at step 60, 1 step before the first NaN/inf" in onset.detail, onset.detail
    assert any("grad_norm 0.8407 -> 64910" in e.text for e in d.evidence)
    assert not any(a.kind.value == "grad-norm-spike" for a in d.anomalies)
    assert "optimization-divergence" not in [c.value for c in d.contributing_factors]


RUN_OWN_COUNTERS = """
    import math
    import torch
    torch.manual_seed(0)
    x = torch.randn(50 * 16, 8); y = x.sum(1, keepdim=True)
    x[(40 - 1) * 16 + 3, 2] = float("inf")  # one corrupt record in the batch of iteration 40 of every epoch
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for epoch in range(1, 6):
        for it in range(1, 51):
            xb, yb = x[(it - 1) * 16 : it * 16], y[(it - 1) * 16 : it * 16]
            if epoch < 3 and it == 40:
                continue  # the sampler skipped it until epoch 3 (a shuffled order, a resumed run)
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad(); loss.backward(); opt.step()
            print(f"Epoch [{epoch}][{it}/50]\\tlr: 1.000e-03, loss: {loss.item():.4f}", flush=True)
            if not math.isfinite(loss.item()):
                raise SystemExit(1)
"""


def test_the_first_nan_is_placed_by_the_runs_own_counters_not_by_lines_of_an_excerpt(tmp_path):
    """A pasted excerpt holds the last lines only: the run's counters say epoch 3, iteration 40 (~140 iterations in),
    so it is a late NaN (one bad record), not 'within the first 100 steps' because two lines come before it."""
    full = _run(tmp_path, RUN_OWN_COUNTERS)
    lines = full.read_text().splitlines()
    nan_at = next(i for i, line in enumerate(lines) if "loss: nan" in line or "loss: inf" in line)
    assert lines[nan_at].startswith("Epoch [3][40/50]"), lines[nan_at - 2 : nan_at + 1]
    excerpt = tmp_path / "excerpt.log"
    excerpt.write_text("\n".join(lines[nan_at - 2 : nan_at + 1]) + "\n")
    d = diagnose(DiagnoseRequest(target=str(excerpt)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    onset = next(a for a in d.anomalies if a.kind.value == "nan-onset")
    assert "epoch 3, iteration 40/50" in onset.detail and "~140 iterations in" in onset.detail, onset.detail
    assert "first 100 steps" not in onset.detail and "step 2" not in onset.detail
