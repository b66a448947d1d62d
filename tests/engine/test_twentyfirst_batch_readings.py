"""General readings written after issue 13's twenty-first prospective batch was scored and the eighth user trial: the
evaluation data named by the same path as the training data (trial 8's case05), a paste that starts with the exception
line, and the exceptions survivors raise once the launcher tears them down (batch 21's 1310). Real runs where the
failure can run here; otherwise the verbatim public log of the corpus case (its case.json cites the thread)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]
np = pytest.importorskip("numpy")
pytest.importorskip("torch")

# a small classifier that prints its configuration first (as a JSON dump or argparse's Namespace), then trains and
# evaluates on the file its configuration names for evaluation
_RUN = """
    import argparse, json, sys, numpy as np, torch
    p = argparse.ArgumentParser()
    p.add_argument("--train_file"); p.add_argument("--validation_file"); p.add_argument("--style"); p.add_argument("--crash", action="store_true")
    args = p.parse_args()
    if args.style == "json":
        print("config:", json.dumps({"data": {"train_file": args.train_file, "validation_file": args.validation_file, "batch_size": 32},
                                     "optim": {"lr": 0.01}}, indent=2), flush=True)
    else:
        print(args, flush=True)
    torch.manual_seed(0)
    tr, ev = np.load(args.train_file), np.load(args.validation_file)
    x, y = torch.tensor(tr[:, :-1]), torch.tensor(tr[:, -1]).long()
    xv, yv = torch.tensor(ev[:, :-1]), torch.tensor(ev[:, -1]).long()
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01); lossf = torch.nn.CrossEntropyLoss()
    for epoch in range(1, 7):
        for i in range(0, len(x), 32):
            loss = lossf(model(x[i:i + 32]), y[i:i + 32]); opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            out = model(xv); vl = lossf(out, yv).item(); va = (out.argmax(1) == yv).float().mean().item()
        print(f"epoch {epoch}/6 | train_loss {loss.item():.4f} | eval_loss {vl:.4f} | eval_acc {va:.4f}", flush=True)
        if args.crash and epoch == 3:
            model.load_state_dict(torch.load("missing-best.pt"))
    torch.save(model.state_dict(), "model.pt"); print("Training finished. Model saved to model.pt", flush=True)
"""


def _data(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    files = []
    for name, n in (("train.npy", 256), ("heldout.npy", 128)):
        x = rng.normal(size=(n, 20)).astype("float32")
        y = (x[:, :1] + 0.3 * rng.normal(size=(n, 1)) > 0).astype("float32")  # learnable: a held-out file scores as well
        (tmp_path / "data").mkdir(exist_ok=True)
        np.save(tmp_path / "data" / name, np.hstack([x, y]))
        files.append(tmp_path / "data" / name)
    return files[0], files[1]


def _run(tmp_path: Path, eval_file: str, style: str, *extra: str):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_RUN))
    train, _ = _data(tmp_path)
    log = tmp_path / f"train-{style}.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, str(script), "--train_file", str(train), "--validation_file", eval_file, "--style", style, *extra],
                       check=False, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, timeout=120)
    return diagnose(DiagnoseRequest(target=str(log)))


@pytest.mark.parametrize("style", ["json", "namespace"])
def test_evaluation_on_the_training_file_is_named_from_the_configuration(tmp_path, style):
    """The evaluation loss follows the training loss down because the evaluation file is the training file, so it
    would do so for a model that memorised too; nothing in the metrics says so, the configuration does (trial 8's
    case05, a memorising model whose held-out test, run once at the end, was far worse)."""
    d = _run(tmp_path, str(tmp_path / "data" / "train.npy"), style)
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.root_cause
    assert d.run_status.value == "degraded"
    found = [a for a in d.anomalies if a.kind.value == "eval-on-train-data"]
    assert found and "validation_file" in found[0].detail and "train_file" in found[0].detail and "train.npy" in found[0].detail
    assert d.fixes and d.fixes[0].fix_id in ("fix-eval-config", "check-split-overlap")


@pytest.mark.parametrize("style", ["json", "namespace"])
def test_evaluation_on_a_held_out_file_is_not_flagged(tmp_path, style):
    d = _run(tmp_path, str(tmp_path / "data" / "heldout.npy"), style)
    assert not [a for a in d.anomalies if a.kind.value == "eval-on-train-data"]
    assert d.primary_cause is None, d.root_cause


def test_a_crash_after_the_shared_file_is_the_ending_and_the_shared_file_contributes(tmp_path):
    """The run dies on a checkpoint it cannot load at epoch 3: that ended it; evaluating on the training file did not
    (corpus 1277, verl's TRAIN_DATA = EVAL_DATA beside its ZeroDivisionError, reads the same way)."""
    d = _run(tmp_path, str(tmp_path / "data" / "train.npy"), "json", "--crash")
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint", d.root_cause
    assert "evaluation-mismatch" in [c.value for c in d.contributing_factors]
    assert d.run_status.value == "crashed"


def _case(n: int) -> Path:
    return next((TESTS / "corpus").glob(f"{n}-*/train.log"))


def test_a_paste_that_starts_with_the_exception_line_and_the_survivors_teardown_chain():
    """1310 (ultralytics/ultralytics#849, verbatim): the paste starts with one rank's 'RuntimeError: Function argument
    device_ids not supported for the selected backend gloo'; torchrun then sends the other rank CTRL_C_EVENT, and that
    rank's interrupted label-cache scan prints a FileNotFoundError chain. Before: data-pipeline, from the chain."""
    d = diagnose(DiagnoseRequest(target=str(_case(1310))))
    assert d.primary_cause is not None and d.primary_cause.value == "nccl-distributed", d.root_cause
    assert d.decisive_excerpt is not None and "selected backend gloo" in d.root_cause.proximate


def test_an_unclassified_exception_line_at_the_start_of_a_log_that_goes_on_is_no_ending():
    """Healthy 328 (a committed stderr whose first line is conda's CommandNotFoundError, then the cross-validation
    folds run): reading a paste's first exception line must not make every such shell error the run's end."""
    path = next((TESTS / "healthy").glob("328-*/train.log"))
    d = diagnose(DiagnoseRequest(target=str(path)))
    assert d.primary_cause is None, d.root_cause
