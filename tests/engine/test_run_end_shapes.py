"""How finished runs end their logs, read as the run's end (issue 13, item 5; the twelfth prospective healthy batch
read four of eight completed runs as running, scored before these changes):

- the PyTorch transfer-learning tutorial's loop: 'Epoch 50/50', a rule, its train and val lines, then a save
  (healthy 214); the same header with no line of its epoch yet is an epoch that just began (healthy 062);
- the CIFAR tutorial's 'Accuracy of the network on the 10000 test images: 97 %' after training (healthy 213);
- a whole run's duration, 'Training time 0:18:36' (Swin's main.py, healthy 199);
- an evaluation's bar after the last epoch (YOLO's final validation of best.pt, Lightning's 'Validating:') is not
  training progress, so the summary before it still ends the run (healthy 210).
Real PyTorch runs print each shape; a log cut before the shape is not completed. The thirteenth batch (scored
before these) added two more: a loop's 'Ep 20 | Loss ...' then a named model's 'PGD Detector Test Accuracy' and its
final save (healthy 215), and a whole-run 'eta: 0:00:00' on detectron2's last iteration line (healthy 224).
Earlier batches' healthy logs that end on a named final evaluation or loss ('[Eval FINAL]', 'Final Loss: 0.088'), the
time all training took ('Time ellapsed in training is: 1271.25'), nanoGPT's '[train] done.' or a script's own last words
'>>> CatBoost Process Finished' (164, 169, 182, 196, 218).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]

_RUN = textwrap.dedent("""
    import sys, time, torch
    from tqdm import tqdm
    torch.manual_seed(0)
    shape, epochs = sys.argv[1], 5
    x = torch.randn(512, 8); y = (x.sum(1) > 0).long()
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    start = time.time()
    def evaluate(xs, ys):
        with torch.no_grad():
            out = model(xs)
            return torch.nn.functional.cross_entropy(out, ys).item(), (out.argmax(1) == ys).float().mean().item()
    for epoch in range(1, epochs + 1):
        if shape == "header":
            print(f"Epoch {epoch}/{epochs}"); print("-" * 10)
        for i in range(0, 384, 32):
            loss = torch.nn.functional.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
            opt.zero_grad(); loss.backward(); opt.step()
        tl, ta = evaluate(x[:384], y[:384]); vl, va = evaluate(x[384:], y[384:])
        if shape == "header":
            print(f"train Loss: {tl:.4f} Acc: {ta:.4f}"); print(f"val Loss: {vl:.4f} Acc: {va:.4f}")
        else:
            print(f"Epoch {epoch} loss: {tl:.4f} val_loss: {vl:.4f}")
        if shape == "bar":
            for _ in tqdm(range(4), desc="Validating", file=sys.stdout, ascii=True):
                time.sleep(0.01)
    if shape == "header":
        torch.save(model.state_dict(), "model.pth"); print("Model saved successfully in 'model.pth'.")
    elif shape == "test":
        print(f"Accuracy of the network on the 128 test images: {100 * evaluate(x[384:], y[384:])[1]:.2f}%")
    elif shape == "duration":
        s = int(time.time() - start)
        print(f"Training time {s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}")
    elif shape == "bar":
        print(f"Total training time: {time.time() - start:.1f}s")
        for _ in tqdm(range(4), desc="Validating best model", file=sys.stdout, ascii=True):
            time.sleep(0.01)
""")

# A hand-written loop that abbreviates its epoch ('[PGD] Ep 20 | Loss ...') and ends on a named model's test accuracy
# and its final save (healthy 215); detectron2's iteration lines, whose 'eta' is the whole run's time left, then the
# final save and an evaluation with NaN for metrics it cannot compute (healthy 224). The eta is measured as detectron2
# measures it (mean iteration time x iterations left), so only the last line says 0:00:00.
_RUN_LATE = textwrap.dedent("""
    import datetime, sys, time, torch
    torch.manual_seed(0)
    x = torch.randn(512, 8); y = (x.sum(1) > 0).long()
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    def step(i):
        loss = torch.nn.functional.cross_entropy(model(x[i % 384:i % 384 + 32]), y[i % 384:i % 384 + 32])
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.item()
    def acc(xs, ys):
        with torch.no_grad():
            return 100 * (model(xs).argmax(1) == ys).float().mean().item()
    if sys.argv[1] == "ep":
        for epoch in range(1, 6):
            loss = sum(step(i) for i in range(0, 384, 32)) / 12
            print(f"[PGD] Ep {epoch} | Loss {loss:.4f} | TrAcc {acc(x[:384], y[:384]):.2f}% | VaAcc {acc(x[384:], y[384:]):.2f}%")
        print(); print("=== Detection Results ===")
        print(f"PGD Detector Test Accuracy: {acc(x[384:], y[384:]):.2f}%")
        torch.save(model.state_dict(), "detector_pgd_final.pt"); print("Saved pgd detector to ./detector_pgd_final.pt")
    else:
        start, max_iter = time.time(), 30
        for it in range(max_iter):
            loss = step(it * 32); time.sleep(0.11)
            if (it + 1) % 10 == 0:
                left = (time.time() - start) / (it + 1) * (max_iter - 1 - it)
                print(f"[12/02 14:00:{it:02d} d2.utils.events]: eta: {datetime.timedelta(seconds=int(left))}  iter: {it}  total_loss: {loss:.3f}  lr: 0.1")
        torch.save(model.state_dict(), "model_final.pth"); print("[12/02 14:01:00 fvcore.common.checkpoint]: Saving checkpoint to ./model_final.pth")
        print("[12/02 14:01:02 d2.evaluation.coco_evaluation]: Some metrics cannot be computed and is shown as NaN.")
        print(f"[12/02 14:01:02 d2.evaluation.testing]: copypaste: {acc(x[384:], y[384:]):.4f},nan")
""")


@pytest.mark.parametrize(("shape", "last_training"), [("ep", "Ep 5 |"), ("eta", "iter: 29")])
def test_a_finished_run_s_late_shapes_end_it(tmp_path, shape, last_training):
    pytest.importorskip("torch")
    lines = subprocess.run([sys.executable, "-c", _RUN_LATE, shape], capture_output=True, text=True, timeout=300,
                           cwd=tmp_path, check=True).stdout.splitlines()
    assert _status(tmp_path, lines) == "completed", lines[-6:]
    end = next(i for i, x in enumerate(lines) if last_training in x)
    assert _status(tmp_path, lines[:end], "cut.log") != "completed", lines[:end][-3:]  # a line before the last one
    if shape == "ep":  # the last epoch with nothing after it: the run may still be going
        assert _status(tmp_path, lines[:end + 1], "cut2.log") != "completed", lines[:end + 1][-2:]


def _run(tmp_path: Path, shape: str) -> list[str]:
    pytest.importorskip("torch")
    pytest.importorskip("tqdm")
    out = subprocess.run([sys.executable, "-c", _RUN, shape], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, check=True).stdout
    return out.replace("\r", "\n").splitlines()


def _status(tmp_path: Path, lines: list[str], name: str = "train.log") -> str:
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return diagnose(DiagnoseRequest(target=str(log))).run_status.value


@pytest.mark.parametrize(("shape", "end"), [
    ("header", "Model saved successfully"),
    ("test", "Accuracy of the network on the 128 test images"),
    ("duration", "Training time 0:00:"),
    ("bar", "Validating best model"),
])
def test_a_finished_run_s_last_lines_end_it(tmp_path, shape, end):
    lines = _run(tmp_path, shape)
    assert any(end in x for x in lines[-8:]), lines[-8:]
    assert _status(tmp_path, lines) == "completed", lines[-8:]
    cut = next(i for i, x in enumerate(lines) if x.startswith(("Epoch 5", "Epoch 5/5")))
    assert _status(tmp_path, lines[:cut + 1], "cut.log") != "completed", lines[:cut + 1][-4:]


@pytest.mark.parametrize("case", ["214", "213", "199", "210", "215", "224", "164", "169", "182", "196", "218"])
def test_healthy_logs_that_end_this_way_are_completed(case):
    log = next((TESTS / "healthy").glob(f"{case}-*")) / "train.log"
    assert diagnose(DiagnoseRequest(target=str(log))).run_status.value == "completed"


def test_an_epoch_header_with_nothing_after_it_has_just_begun():
    log = next((TESTS / "healthy").glob("062-*")) / "train.log"
    assert diagnose(DiagnoseRequest(target=str(log))).run_status.value != "completed"


_ZERO_BASED = textwrap.dedent("""
    import sys, torch
    torch.manual_seed(0)
    epochs, first = 50, int(sys.argv[1])  # 0: `for epoch in range(50)`; 1: a 1-based loop
    stop = int(sys.argv[2])  # the epoch after which the run is killed (a time limit), or 0 for none
    x = torch.randn(256, 8); y = x.sum(1, keepdim=True)
    model = torch.nn.Linear(8, 1); opt = torch.optim.SGD(model.parameters(), lr=0.05)
    best, best_epoch = float("inf"), -1
    for epoch in range(first, epochs + first):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"epoch={epoch}/{epochs},total_loss={loss.item():.6f}", flush=True)
        print(f"lr, {opt.param_groups[0]['lr']}", flush=True)
        if loss.item() < best:
            best, best_epoch = loss.item(), epoch
        if stop and epoch == stop:
            raise SystemExit(0)  # cut here, as a scheduler's kill would leave the file (its own line is not in it)
    print("best_loss: ", best, " best_epoch:", best_epoch, flush=True)
""")


def _zero_based(tmp_path: Path, first: int, stop: int) -> Path:
    log = tmp_path / "train.log"
    with log.open("wb") as out:
        subprocess.run([sys.executable, "-c", _ZERO_BASED, str(first), str(stop)], stdout=out, stderr=subprocess.STDOUT,
                       timeout=300, check=True)
    return log


def test_a_zero_based_counter_one_short_of_its_total_then_a_summary_is_the_runs_end(tmp_path):
    """Batch 19's healthy 438: 'epoch=249/250,total_loss=...' then 'best_loss: ... best_epoch: 244' (a 0-based loop)."""
    log = _zero_based(tmp_path, 0, 0)
    assert log.read_text().splitlines()[-3].startswith("epoch=49/50")
    assert diagnose(DiagnoseRequest(target=str(log))).run_status.value == "completed"


def test_a_one_based_counter_cut_one_epoch_short_is_not(tmp_path):
    log = _zero_based(tmp_path, 1, 49)
    assert log.read_text().splitlines()[-2].startswith("epoch=49/50")  # then its per-epoch 'lr, ...' line, no summary
    assert diagnose(DiagnoseRequest(target=str(log))).run_status.value != "completed"


def test_a_powershell_prompt_after_the_last_results_is_the_process_returning_to_its_shell():
    """Batch 19's healthy 481, a committed log (THGNN's 20/20 epochs, then its test metrics): it ends on the prompt
    '(.venv) PS C:\\Users\\Administrator\\Desktop\\thgnn> ' the process returned to (no PowerShell here to run one)."""
    case = next((TESTS / "healthy").glob("481-*"))
    assert (case / "train.log").read_text().rstrip().endswith("thgnn>")
    assert diagnose(DiagnoseRequest(target=str(case / "train.log"))).run_status.value == "completed"
