"""General readings written after issue 13's twentieth prospective batch was scored (each case failed or abstained
before): a guess no better than chance read from the held-out numbers, a training accuracy of exactly 0, XGBoost's empty
label set, and Windows' native-crash exit codes. Real runs where the failure can run here; otherwise the verbatim public
log of the corpus case (its case.json cites the thread)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.read.metrics import parse_line

TESTS = Path(__file__).resolve().parents[1]

# A binary classifier printed the way Keras prints an epoch; its training loss is the last batch's (noisy), its
# validation loss and accuracy are over a balanced held-out set
_RUN = """
    import sys, torch
    torch.manual_seed(int(sys.argv[1]))
    signal = sys.argv[2] == "signal"
    n, d = 512, 16
    x = torch.randn(n, d); y = (x[:, 0] > 0).long()
    yv = torch.cat([torch.zeros(128), torch.ones(128)]).long()
    xv = torch.randn(256, d); xv[:, 0] = torch.where(yv == 1, xv[:, 0].abs(), -xv[:, 0].abs())
    scale = 1.0 if signal else 0.0  # the features zeroed before the model: only the class prior can be learned
    model = torch.nn.Sequential(torch.nn.Linear(d, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    lossf = torch.nn.CrossEntropyLoss()
    for epoch in range(1, 9):
        print(f"Epoch {epoch}/8")
        perm = torch.randperm(n)
        for i in range(0, n, 8):
            idx = perm[i:i + 8]
            out = model(x[idx] * scale); loss = lossf(out, y[idx]); opt.zero_grad(); loss.backward(); opt.step()
            acc = (out.argmax(1) == y[idx]).float().mean().item()
        with torch.no_grad():
            ov = model(xv * scale); vl = lossf(ov, yv).item(); va = (ov.argmax(1) == yv).float().mean().item()
        print(f"64/64 [==============================] - 1s 9ms/step - loss: {loss.item():.4f} - accuracy: {acc:.4f}"
              f" - val_loss: {vl:.4f} - val_accuracy: {va:.4f}")
"""


def _logged(tmp_path: Path, name: str, body: str, *args: str, log: str = "train.log", timeout: float = 120,
            check: bool = False) -> Path:
    """Run `body` as the script `name` in tmp_path, its stdout and stderr into `log`; a run its timeout ends keeps what it
    printed (the test's stand-in for a kill)."""
    script = tmp_path / name
    script.write_text(textwrap.dedent(body))
    path = tmp_path / log
    with open(path, "wb") as out:
        try:
            subprocess.run([sys.executable, str(script), *args], stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=check)
        except subprocess.TimeoutExpired:
            pass
    return path


def _run(tmp_path: Path, seed: int, mode: str):
    log = _logged(tmp_path, "train.py", _RUN, str(seed), mode, log=f"train-{mode}-{seed}.log", check=True)
    return diagnose(DiagnoseRequest(target=str(log)))


@pytest.mark.parametrize("seed", [0, 3])
def test_a_held_out_loss_at_ln2_with_held_out_accuracy_at_one_half_is_a_guess_no_better_than_chance(tmp_path, seed):
    """The training loss of the last batch wanders (0.69-0.71, its accuracy 0.375-0.5), so the training numbers alone
    do not say chance; the validation loss sits at ln 2 and the validation accuracy at 0.5000 epoch after epoch
    (batch 20's 1287, RWF-2000 on tf.keras: val_accuracy 0.5000 at six of seven epochs beside val_loss 0.693)."""
    d = _run(tmp_path, seed, "zero")
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", d.root_cause
    assert any("validation loss" in a.detail and "ln 2" in a.detail for a in d.anomalies), [a.detail for a in d.anomalies]


def test_the_same_classifier_with_its_features_learns_and_is_not_at_chance(tmp_path):
    d = _run(tmp_path, 0, "signal")
    assert d.primary_cause is None, d.root_cause


def _case(kind: str, prefix: str):
    return diagnose(DiagnoseRequest(target=str(next((TESTS / kind).glob(f"{prefix}-*")) / "train.log")))


def test_a_training_accuracy_of_exactly_zero_log_after_log_is_a_collapse():
    """1292 (apache/mxnet#5326): an 8-GPU ImageNet run prints Train-accuracy=0.002266 at batch 50, then 0.000000 at
    every log from batch 100: below any guess, nothing crashes. Was 'running' with no class."""
    d = _case("corpus", "1292")
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", d.root_cause
    assert any(a.kind.value == "accuracy-collapse" and "exactly 0" in a.detail for a in d.anomalies)


@pytest.mark.parametrize(("case", "expected", "line"), [
    ("1285", "data-pipeline", "Label set is empty"),  # dmlc/xgboost#6272, logged at WARNING before the task fails
    ("1288", "process-crash", "exit status 3221225477"),  # bmaltais/kohya_ss#2556, 0xC0000005 under accelerate's launcher
])
def test_a_libraries_own_wording_names_its_failure(case, expected, line):
    d = _case("corpus", case)
    assert d.primary_cause is not None and d.primary_cause.value == expected, d.root_cause
    assert any(line in e.text for e in d.evidence), [e.text for e in d.evidence]


@pytest.mark.parametrize(("case", "line"), [
    ("489", "-----completing training in 113880.80 seconds-----"),  # VisualAtom pretraining, early stopped at epoch 61
    ("498", "Finished: 2026-09-30 00:58:21"),  # SnowML fine-tune: its start/finish stamps, then MLflow's links
    ("502", "train.py main execution finished"),  # an MLflow regression pipeline's last record
])
def test_a_scripts_own_closing_line_is_the_runs_end(case, line):
    """Committed healthy logs (their case.json cites the file) that ended well and said so in their own words; each
    was 'running' or 'unknown' before."""
    d = _case("healthy", case)
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value == "completed"


def test_a_progress_note_logged_at_critical_level_is_no_failure(tmp_path):
    """Healthy 501's shape, run for real: a script that logs its steps at INFO and 'Starting finetuning' at CRITICAL,
    then its log ends (the run goes on, or was cut). The level is the program's choice; the words name no failure."""
    log = _logged(tmp_path, "ft.py", """
        import logging
        logging.basicConfig(level=logging.INFO)
        log = logging.getLogger("__main__")
        log.info("Loaded Dataset")
        log.info("Loaded meta-llama/Llama-3.2-1B")
        log.critical("Starting finetuning")
    """, timeout=60, check=True)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value != "crashed"


def test_a_failure_logged_at_critical_level_is_still_the_end(tmp_path):
    """The control: the same script logging 'Loading checkpoint failed: no such file' at CRITICAL and stopping."""
    log = _logged(tmp_path, "ft.py", """
        import logging, sys
        logging.basicConfig(level=logging.INFO)
        log = logging.getLogger("__main__")
        log.info("Loaded Dataset")
        log.critical("Loading checkpoint failed: no such file ckpt/last.pt")
        sys.exit(1)
    """, timeout=60)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None, d.evidence


_WRAPPER = """
    import logging, socket, sys
    import torch
    logging.basicConfig(format="%(asctime)s - train - %(levelname)s - %(message)s", level=logging.INFO)
    log = logging.getLogger("train")

    def attempt(n):
        if n == 0:
            torch.empty(2 ** 60, dtype=torch.uint8)  # the allocator refuses: out of memory
        if n == 1 and sys.argv[1] == "attempts":
            Path("data.yaml")  # a missing import
        if n == 1:
            peer, _ = socket.socketpair()
            peer.settimeout(0.3)
            peer.recv(1)  # a peer that never answers: 'timed out'
        raise ValueError("Dataset 'data.yaml' error  data.yaml 'names' length 11 and 'nc: 10' must match.")

    for n in range(3 if sys.argv[1] == "attempts" else 2):
        try:
            attempt(n)
        except Exception as e:
            log.error(f"Training failed: {e}")
"""


def _wrapper(tmp_path: Path, mode: str):
    log = _logged(tmp_path, "wrap.py", _WRAPPER, mode, log=f"{mode}.log")
    return log, diagnose(DiagnoseRequest(target=str(log)))


def test_a_wrappers_failure_record_printed_once_per_attempt_is_read_at_the_last_attempt(tmp_path):
    """1299's shape, run for real: a training wrapper logs 'Training failed: <why>' once per attempt - the allocator's
    out of memory, then a missing import, then a dataset check. What ended the run is the last attempt's failure;
    the first attempt's OOM is history (it was the primary cause before)."""
    log, d = _wrapper(tmp_path, "attempts")
    assert log.read_text().count("Training failed:") == 3
    assert d.primary_cause is not None and d.primary_cause.value != "oom", d.root_cause
    assert d.evidence[0].line_no == len(log.read_text().splitlines()), d.evidence


def test_a_later_record_that_names_a_peer_or_a_timeout_is_an_echo_not_a_new_attempt(tmp_path):
    """The control: the same record's second message is a connection timing out (what a peer's failure looks like):
    the first failure, the OOM, stays the cause."""
    log, d = _wrapper(tmp_path, "echo")
    assert "timed out" in log.read_text()
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.root_cause


_ONE_EPOCH = """
    import logging, sys, time
    import torch
    logging.basicConfig(format="%(asctime)s - __main__ - %(levelname)s - %(message)s", level=logging.INFO, stream=sys.stdout)
    log = logging.getLogger("__main__")
    torch.manual_seed(0)
    x = torch.randn(256, 8); y = (x[:, 0] > 0).long()
    model = torch.nn.Linear(8, 2); opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(1, 2):
        for i in range(0, 256, 32):
            loss = torch.nn.functional.cross_entropy(model(x[i:i + 32]), y[i:i + 32]); opt.zero_grad(); loss.backward(); opt.step()
        acc = (model(x).argmax(1) == y).float().mean().item()
        log.info(f"Epoch {epoch}/1, Train Loss: {loss.item()}, Train Accuracy: {acc}")
        sys.stdout.flush()
        if sys.argv[1] == "killed":
            time.sleep(30)  # ended by the test's timeout during the validation pass
        log.info(f"Epoch {epoch}/1, Validation Loss: {loss.item() * 1.1}, Validation Accuracy: {acc * 0.95}")
"""


def _one_epoch(tmp_path: Path, mode: str):
    log = _logged(tmp_path, "one.py", _ONE_EPOCH, mode, log=f"{mode}.log", timeout=8)
    return diagnose(DiagnoseRequest(target=str(log)))


def test_a_one_epoch_runs_evaluation_of_its_only_epoch_is_its_end(tmp_path):
    """Healthy 509's shape, run for real: 'Epoch 1/1, Train Loss: ...' then 'Epoch 1/1, Validation Loss: ...' and the
    process exits: the run reached its end (it read 'running' before)."""
    d = _one_epoch(tmp_path, "done")
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value == "completed"


def test_a_one_epoch_run_cut_before_its_evaluation_is_not_called_completed(tmp_path):
    d = _one_epoch(tmp_path, "killed")
    assert d.run_status.value != "completed"


def test_double_colon_metrics_are_read_and_a_final_test_result_ends_the_run(tmp_path):
    """Healthy 499's shape, run for real: a loop printing 'epoch 0: train loss :: 1.696, train acc :: 0.412, dev acc ::
    0.391', then loading its best model and printing 'dev acc :: ...' and 'test acc :: ...'. The '::' separator was not
    read, so no progress was seen and the status was 'running'."""
    log = _logged(tmp_path, "sst.py", """
        import torch
        torch.manual_seed(0)
        x = torch.randn(512, 8); y = (x[:, 0] > 0).long()
        model = torch.nn.Linear(8, 2); opt = torch.optim.SGD(model.parameters(), lr=0.3)
        for epoch in range(3):
            loss = torch.nn.functional.cross_entropy(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
            acc = (model(x).argmax(1) == y).float().mean().item()
            print(f"epoch {epoch}: train loss :: {loss.item():.3f}, train acc :: {acc:.3f}, dev acc :: {acc * 0.95:.3f}")
        print("load model from finetune-1-2e-05.pt")
        print(f"dev acc :: {acc * 0.95:.3f}")
        print(f"test acc :: {acc * 0.94:.3f}")
    """, timeout=60, check=True)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value == "completed"
    first = parse_line(log.read_text().splitlines()[0])
    assert first is not None and set(first[0]) == {"loss", "acc", "val_acc"}, first
