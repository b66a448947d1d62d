"""General readings written after issue 13's twenty-second prospective batch was scored: ends of runs the engine read
as still running (healthy 536, 539, 555: the DeepSpeed launcher's 'exits successfully' for every process; Keras' early
stop followed by a converted model's lone accuracy; PaddleSeg's last iteration followed by its final evaluation). Real
runs where the shape can run here (a PyTorch loop whose counter reaches its total, then evaluates); otherwise the
verbatim public log of the case (its case.json cites the file), with verbatim controls."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.analyse import quietend
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _status(log: Path) -> str:
    return diagnose(DiagnoseRequest(target=str(log))).run_status.value


def _case(n: str) -> Path:
    return next((TESTS / "healthy").glob(f"{n}-*")) / "train.log"


def _slice(log: Path, upto: int, dest: Path) -> Path:
    """The first `upto` lines of a real log: a cut of the file, as a log copied while its run goes on is."""
    dest.write_text("".join(log.read_text(encoding="utf-8").splitlines(keepends=True)[:upto]), encoding="utf-8")
    return dest


def test_every_deepspeed_process_exiting_successfully_is_the_end(tmp_path: Path):
    log = _case("536")
    assert _status(log) == "completed"
    lines = log.read_text(encoding="utf-8").splitlines()
    first_exit = next(i for i, x in enumerate(lines) if "exits successfully" in x)
    assert _status(_slice(log, first_exit, tmp_path / "train.log")) in {"running", "unknown"}  # before the exits


def test_a_non_zero_exit_after_the_last_step_is_fatal():
    # the DeepSpeed launcher's line for a process that failed, as tests/corpus holds it, and torchrun's
    assert quietend.fatal("[2024-09-15 00:13:42,132] [INFO] [launch.py:351:main] Process 23918 exits with return code = 1")
    assert quietend.fatal("  exitcode  : 1 (pid: 2466)")
    assert not quietend.fatal("[2024-09-15 00:13:42,132] [INFO] [launch.py:351:main] Process 23917 exits successfully.")
    assert not quietend.fatal("exitcode  : 0 (pid: 2466)")


def test_a_lone_result_after_the_run_summary_does_not_hide_the_summary():
    # 539: 'Epoch 44: early stopping', TFLite conversion lines, then 'Accuracy: 0.7647' (read as a metric line)
    assert _status(_case("539")) == "completed"
    # 401: a Chinese 'total time' (总耗时) of an evaluation in the middle of the log, then 60 lines of PPO iterations
    assert _status(_case("401")) in {"running", "unknown"}


_LOOP = """
    import sys, torch
    torch.manual_seed(0)
    x = torch.randn(256, 8); y = (x.sum(1) > 0).long()
    model = torch.nn.Linear(8, 2); opt = torch.optim.SGD(model.parameters(), lr=0.1); lossf = torch.nn.CrossEntropyLoss()
    total = 40
    for it in range(1, total + 1):
        i = (it * 16) % 256
        loss = lossf(model(x[i:i + 16]), y[i:i + 16]); opt.zero_grad(); loss.backward(); opt.step()
        if it % 10 == 0:
            print(f"[TRAIN] epoch: {it // 8}, iter: {it}/{total}, loss: {loss.item():.4f}, lr: 0.100000", flush=True)
    print(f"Start evaluating (total_samples: 256, total_iters: {total})...", flush=True)
    for k in range(1, 5):
        print(f"{k}/4 - 0s - batch_cost: 0.0012 - reader cost: 0.0001", flush=True)
    if sys.argv[1] == "crash":
        torch.zeros(2, 3) @ torch.zeros(2, 3)
    acc = (model(x).argmax(1) == y).float().mean().item()
    print(f"[EVAL] #Images: 256 mIoU: {acc:.4f} Acc: {acc:.4f}", flush=True)
"""


@pytest.mark.parametrize("how", ["ends", "crash"])
def test_the_last_iteration_then_the_final_evaluation(tmp_path: Path, how: str):
    pytest.importorskip("torch")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        subprocess.run([sys.executable, "-c", textwrap.dedent(_LOOP), how], check=False, stdout=out, stderr=subprocess.STDOUT, timeout=300)
    got = _status(log)
    assert got == ("completed" if how == "ends" else "crashed"), log.read_text()
    if how == "ends":
        assert _status(_case("555")) == "completed"  # PaddleSeg: iter 16000/16000, evaluation, FLOPs, store shutdown


def test_a_sigterm_after_a_process_own_error_is_the_teardown():
    # 1328 (PaddleOCR, verbatim): 'RuntimeError: (PreconditionNotMet) ... libnccl.so ... cannot open shared object
    # file', then Paddle's 'FatalError: `Termination signal` is detected' and 'SIGTERM ... received by PID 32724 from
    # PID 32567' (the failed process, taking its peer down): the missing library, not the signal
    log = next((TESTS / "corpus").glob("1328-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"


def test_a_sigterm_after_an_error_the_run_survived_stays_the_stop():
    from ml_skills.engine.classify.cascades import own_error_before_a_kill
    from ml_skills.engine.classify.signals import Signal
    from ml_skills.models import FailureClass, Role

    def sig(cls, label, line, text, survived=False):
        return Signal(FailureClass(cls), 1.2, "traceback" if label.startswith("traceback:") else "signature", label,
                      "train.log", line, text, Role.SYMPTOM, survived=survived)

    for survived, halved in ((False, True), (True, False)):
        own = sig("config-error", "traceback:unclassified-exception", 150, "RuntimeError: (PreconditionNotMet) ...", survived)
        term = sig("process-crash", "killed-by-signal", 169, "FatalError: `Termination signal` is detected by the operating system.")
        seg = sig("process-crash", "killed-by-signal", 170, "Fatal Python error: Segmentation fault")  # not a SIGTERM
        own_error_before_a_kill([own, term, seg])
        assert (term.weight < 1.2) is halved and seg.weight == 1.2


_TWO_LOGGERS = """
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1); opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps_per_epoch = 10000
    for step in range(1, 2601):
        x = torch.randn(32, 16)
        if step == 2500:
            x[0, 0] = float("inf")  # one corrupt sample: the forward pass gives inf - inf = nan
        loss = ((model(x) - model(x).detach() * 0 - 1.0) ** 2).mean() + (x.sum() - x.sum())
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 100 == 0:  # the trainer's own dict, with the epoch only
            print({"loss": round(loss.item(), 4), "learning_rate": 0.01, "epoch": round(step / steps_per_epoch, 2)}, flush=True)
        if step % 200 == 0:  # a second logger of the same run, with the global step
            print(f"step={step} loss={loss.item():.4f} lr=1.000e-02", flush=True)
"""


def test_a_nan_on_an_epoch_only_line_after_step_counters_is_not_called_early(tmp_path: Path):
    pytest.importorskip("torch")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        subprocess.run([sys.executable, "-c", textwrap.dedent(_TWO_LOGGERS)], check=True, stdout=out, stderr=subprocess.STDOUT, timeout=300)
    assert "'loss': nan" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    onset = next(e for e in d.evidence if "nan-onset" in e.text)
    assert "first 100 steps" not in onset.text  # step=2400 was printed before the nan at epoch 0.25


@pytest.mark.parametrize(("case", "want"), [("1329", ("other", "paddle")), ("1338", ("jax", None)), ("1340", ("ray", None))])
def test_frameworks_named_by_their_own_messages(case: str, want: tuple[str, str | None]):
    # 1329: Paddle's 'DataLoader worker(1) caught FileNotFoundError' is not PyTorch's 'DataLoader worker process 0' or
    # 'DataLoader worker (pid 123)'; 1338: Levanter's logger names ('levanter.eval'), a JAX-only library; 1340: Ray's
    # 'RayTask ID:', 'Worker exit type: SYSTEM_ERROR' and 'The actor is dead because its worker process has died'
    from ml_skills.engine.read import frameworks, scan

    log = next((TESTS / "corpus").glob(f"{case}-*")) / "train.log"
    assert frameworks.decide([scan.scan_log(log)]) == want
