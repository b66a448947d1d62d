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


# two torchrun launches of one job script into one log, as a sweep script runs them: the first fails at its first
# collective (rank 0 waits for a broadcast rank 1 never sends in time); the second starts and waits at its first barrier
_DIST = """
    import datetime, os, sys, time, torch, torch.distributed as dist
    print(f"[{os.environ['RANK']}] starting task {sys.argv[1]} with torch {torch.__version__}", flush=True)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6))
    rank = dist.get_rank()
    print(f"[{rank}] init_process_group done: backend gloo, world size {dist.get_world_size()}", flush=True)
    t = torch.zeros(1024)
    if rank == 1:
        time.sleep(40)  # rank 1 is late: its peer waits for it
    if sys.argv[1] == "first":
        dist.broadcast(t, src=1)
    dist.barrier()
    print(f"[{rank}] step 1 | loss 2.3026", flush=True)
"""


def test_a_relaunch_that_stops_at_its_first_barrier_has_not_gone_past_the_failure_before_it(tmp_path):
    """1301 (O-LoRA's README, verbatim): a DeepSpeed launch whose first BROADCAST times out on both ranks, then the sweep
    script's next launch, whose log ends at its first barrier. The relaunch ran no step, so it did not outlive the
    timeout: before, the run was 'recovered' with no cause; now the timeout is the cause and the run crashed. Here the
    same shape from two real torchrun launches, the log read while the second one waits."""
    import os
    import shutil
    import signal
    import time

    script = tmp_path / "task.py"
    script.write_text(textwrap.dedent(_DIST))
    log = tmp_path / "sweep.log"
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"} | {"HOME": str(tmp_path)}  # torchrun's banner each launch
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29731", str(script)]
    with open(log, "wb") as out:
        subprocess.run([*launch, "first"], stdout=out, stderr=subprocess.STDOUT, env=env, timeout=120, check=False)
        second = subprocess.Popen([*launch, "second"], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while log.read_text().count("init_process_group done") < 4 and time.monotonic() < deadline:
                time.sleep(0.5)
            time.sleep(1.0)
            snapshot = tmp_path / "train.log"
            shutil.copyfile(log, snapshot)  # the log as a person finds it while the relaunch waits
        finally:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait()
    text = snapshot.read_text()
    assert "Timed out" in text and text.count("init_process_group done") == 4, text[-3000:]
    d = diagnose(DiagnoseRequest(target=str(snapshot)))
    assert d.primary_cause is not None and d.primary_cause.value == "nccl-distributed", d.root_cause
    assert d.run_status.value == "crashed"
    d = diagnose(DiagnoseRequest(target=str(_case(1301))))
    assert d.primary_cause is not None and d.primary_cause.value == "nccl-distributed", d.root_cause


def test_a_relaunch_whose_log_ends_where_the_failed_launch_failed_has_not_gone_past_it():
    """1324 (a committed checkpoints/train.log, verbatim): the first launch runs out of memory in its initial
    evaluation; the relaunch prints the same start-up and stops, no error, at 'Starting Evaluation (0)...', the line
    the first launch printed just before its OOM. Before: 'recovered', no cause. A relaunch that went on (healthy 084:
    'Train Epoch: 1516' after the worker segfault in epoch 1515) still outlives the failure."""
    d = diagnose(DiagnoseRequest(target=str(_case(1324))))
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.root_cause
    assert d.run_status.value == "crashed"
    d = diagnose(DiagnoseRequest(target=str(next((TESTS / "healthy").glob("084-*/train.log")))))
    assert d.primary_cause is None and d.run_status.value == "recovered", d.root_cause


# a run resumed past its cosine schedule ('past' = the schedule has ended: the learning rate stays at 0), or one
# inside it; a person stops it with SIGTERM to torchrun, as one stops a run that goes nowhere
_SCHEDULE = """
    import math, sys, time, torch
    torch.manual_seed(0)
    x = torch.randn(512, 8); y = (x[:, 0] > 0).long()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    planned = 5 if sys.argv[1] == "past" else 10_000
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: max(0.0, 0.5 * (1 + math.cos(math.pi * min(e, planned) / planned))))
    lossf = torch.nn.CrossEntropyLoss()
    for epoch in range(1, 10_000):
        for i in range(0, 512, 64):
            loss = lossf(model(x[i:i + 64]), y[i:i + 64]); opt.zero_grad(); loss.backward(); opt.step()
            print(f"Epoch: [{epoch}] [{i // 64}/8] learning_rate: {opt.param_groups[0]['lr']:.6f} loss: {loss.item():.6f}", flush=True)
        sched.step()
        time.sleep(0.05)
"""


def _stopped(tmp_path: Path, mode: str):
    import os
    import signal
    import time

    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_SCHEDULE))
    log = tmp_path / f"train-{mode}.log"
    env = {**os.environ, "HOME": str(tmp_path)}
    with open(log, "wb") as out:
        p = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", "--master-port", "29733",
                              str(script), mode], stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 90
            while log.read_text().count("Epoch: [") < 200 and time.monotonic() < deadline:
                time.sleep(0.3)
            p.send_signal(signal.SIGTERM)  # to the agent, as `kill PID` of the launcher does
            p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
    assert "got signal: 15" in log.read_text()
    return diagnose(DiagnoseRequest(target=str(log)))


def test_torchruns_signal_exception_for_a_sigterm_is_a_stop_not_a_collective(tmp_path):
    """The agent raises SignalException in its monitor loop (frames in torch/distributed/): before, it was read as an
    exception inside a collective, nccl-distributed. It is the SIGTERM that stopped the run."""
    d = _stopped(tmp_path, "inside")
    assert d.primary_cause is not None and d.primary_cause.value == "process-crash", d.root_cause


def test_a_sigterm_after_a_schedule_ended_at_zero_is_not_the_story(tmp_path):
    """Past its schedule the learning rate is 0 and every epoch replays the last one's losses; the SIGTERM that ends
    it says only that it was stopped (1305, PaddleDetection resumed past its 80-epoch cosine: learning_rate 0.000000
    for thirty epochs, then a SIGTERM; before, process-crash)."""
    d = _stopped(tmp_path, "past")
    assert d.primary_cause is not None and d.primary_cause.value in ("optimization-divergence", "config-error"), d.root_cause
    d = diagnose(DiagnoseRequest(target=str(_case(1305))))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.root_cause
    assert d.fixes[0].fix_id == "fix-lr-schedule", [f.fix_id for f in d.fixes]  # before: generic config-error fixes


# a classifier printed as Keras prints an epoch; 'noise' labels half the training set at random, so the model can only
# memorise them and held-out accuracy stays far below the training accuracy
_FIT = """
    import sys, torch
    torch.manual_seed(0)
    noisy = sys.argv[1] == "noise"
    n, d = 400, 30
    x = torch.randn(n, d); y = (x[:, 0] > 0).long()
    if noisy:
        flip = torch.rand(n) < 0.5; y[flip] = torch.randint(0, 2, (int(flip.sum()),))
    xv = torch.randn(400, d); yv = (xv[:, 0] > 0).long()
    model = torch.nn.Sequential(torch.nn.Linear(d, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 2))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3); lossf = torch.nn.CrossEntropyLoss()
    for epoch in range(1, 301):
        for i in range(0, n, 50):
            loss = lossf(model(x[i:i + 50]), y[i:i + 50]); opt.zero_grad(); loss.backward(); opt.step()
        if epoch % 10:
            continue
        with torch.no_grad():
            out = model(x); tl = lossf(out, y).item(); ta = (out.argmax(1) == y).float().mean().item()
            ov = model(xv); vl = lossf(ov, yv).item(); va = (ov.argmax(1) == yv).float().mean().item()
        print(f"Epoch {epoch}/300")
        print(f" - 1s - loss: {tl:.4f} - acc: {ta:.4f} - val_loss: {vl:.4f} - val_acc: {va:.4f}", flush=True)
"""


@pytest.mark.parametrize("mode", ["noise", "clean"])
def test_memorisation_read_from_the_last_evaluations_of_a_pasted_tail(tmp_path, mode):
    """1319 (kk7nc/RMDL#14, verbatim) pastes epochs 69-77 only: training accuracy 0.99 at loss 0.03, validation 0.64-0.70
    at 3.4-3.96, after the climb the rising-loss reading needs. The tail of a real run that memorises noisy labels reads
    the same; the same run on clean labels (validation as good as training) does not."""
    full = tmp_path / "full.log"
    (tmp_path / "fit.py").write_text(textwrap.dedent(_FIT))
    with open(full, "wb") as out:
        subprocess.run([sys.executable, str(tmp_path / "fit.py"), mode], stdout=out, stderr=subprocess.STDOUT, timeout=300, check=True)
    tail = tmp_path / "train.log"
    tail.write_text("".join(full.read_text().splitlines(keepends=True)[-12:]))  # `tail -n 12`, the last six epochs
    d = diagnose(DiagnoseRequest(target=str(tail)))
    if mode == "noise":
        assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", (d.root_cause, tail.read_text())
        d = diagnose(DiagnoseRequest(target=str(_case(1319))))
        assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.root_cause
    else:
        assert d.primary_cause is None, (d.root_cause, tail.read_text())


@pytest.mark.parametrize("case", [520, 526, 535])
def test_a_step_counter_at_its_total_in_json_lines_and_rays_job_verdict_end_a_run(case, tmp_path):
    """Healthy 526 and 535 (LLaMA-Factory's trainer_log.jsonl, verbatim: '"current_steps": 6750, "total_steps": 6750')
    and 520 (Ray's job CLI: "Job 'raysubmit_...' succeeded") completed; before, running and unknown. The same
    trainer_log.jsonl cut before its last record (as the file read while the run still wrote it) is still running."""
    path = next((TESTS / "healthy").glob(f"{case}-*/train.log"))
    d = diagnose(DiagnoseRequest(target=str(path)))
    assert d.primary_cause is None and d.run_status.value == "completed", (d.run_status, d.root_cause)
    if case != 520:
        lines = path.read_text().splitlines(keepends=True)
        cut = tmp_path / "trainer_log.jsonl"
        cut.write_text("".join(lines[:-3]))  # the file two records before its end
        d = diagnose(DiagnoseRequest(target=str(cut)))
        assert d.primary_cause is None and d.run_status.value in ("running", "unknown"), d.run_status


# a 10-class classifier whose inputs are zeroed before the model ('dead'): only the balanced prior can be learned, so the
# loss settles at ln 10; the 'Accuracy' it prints is element-wise over the one-hot targets (about 0.9 whatever it predicts)
_TEN = """
    import sys, torch
    torch.manual_seed(0)
    dead = sys.argv[1] == "dead"
    n, d = 2000, 20
    x = torch.randn(n, d); y = torch.arange(n) % 10
    x[torch.arange(n), y] += 3.0  # the class is readable from the inputs
    model = torch.nn.Sequential(torch.nn.Linear(d, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2); lossf = torch.nn.CrossEntropyLoss()
    for epoch in range(1, 11):
        tot = hit = 0.0
        for i in range(0, n, 100):
            xb = x[i:i + 100] * (0.0 if dead else 1.0)
            out = model(xb); loss = lossf(out, y[i:i + 100]); opt.zero_grad(); loss.backward(); opt.step()
            onehot = torch.nn.functional.one_hot(y[i:i + 100], 10).float()
            hit += ((out.softmax(1) > 0.5).float() == onehot).float().mean().item(); tot += loss.item()
        print(f"Epoch: {epoch}, Loss: {tot / (n // 100)}, Accuracy: {hit / (n // 100)}", flush=True)
"""


@pytest.mark.parametrize("mode", ["dead", "alive"])
def test_a_loss_pinned_at_ln_c_for_epochs_is_chance_whatever_the_accuracy_beside_it_says(tmp_path, mode):
    """1312 (SciSharp/SiaNet#3, verbatim): loss 2.3021-2.3022 = ln 10 for nine epochs beside an 'Accuracy' of 0.89;
    before, no class (the chance reading wanted an accuracy of 1/C beside it). A real run whose inputs are zeroed reads
    the same; the run that sees its inputs learns, and is not flagged."""
    script = tmp_path / "ten.py"
    script.write_text(textwrap.dedent(_TEN))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, str(script), mode], stdout=out, stderr=subprocess.STDOUT, timeout=300, check=True)
    d = diagnose(DiagnoseRequest(target=str(log)))
    if mode == "dead":
        assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", (d.root_cause, log.read_text())
        assert any("ln 10" in a.detail for a in d.anomalies)
        d = diagnose(DiagnoseRequest(target=str(_case(1312))))
        assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", d.root_cause
    else:
        assert d.primary_cause is None, (d.root_cause, log.read_text())


# an evaluation job that polls for the checkpoint its training job should write, as Faster-RCNN_TF's test_net does;
# 'never': the name it waits for is not the name the saver writes; 'found': the file appears and it evaluates
_POLL = """
    import os, sys, time
    want = sys.argv[1]
    if sys.argv[2] == "found":
        open(want, "w").write("weights")
    while not os.path.exists(want):
        print(f"Waiting for {want} to exist...", flush=True)
        time.sleep(0.2)
    print(f"Loaded {want}", flush=True)
    for i in range(1, 6):
        print(f"im_detect: {i}/5 0.051s", flush=True)
    print("Evaluating detections\\nMean AP = 0.7012", flush=True)
"""


@pytest.mark.parametrize("mode", ["never", "found"])
def test_a_log_ending_in_one_wait_line_printed_again_and_again_is_a_program_waiting_in_a_loop(tmp_path, mode):
    """1316 (smallcorgi/Faster-RCNN_TF#157, verbatim): 'Waiting for .../VGGnet_fast_rcnn_iter_70000.ckpt to exist...'
    for twelve hours (the V2 saver writes other file names); before, no reading at all. A real poller that never finds
    its file reads as stalled and names the line; the same poller that finds it is not flagged."""
    script = tmp_path / "test_net.py"
    script.write_text(textwrap.dedent(_POLL))
    log = tmp_path / "test.log"
    with open(log, "wb") as out:
        try:
            subprocess.run([sys.executable, str(script), str(tmp_path / "iter_70000.ckpt"), mode], stdout=out,
                           stderr=subprocess.STDOUT, timeout=3, check=False)
        except subprocess.TimeoutExpired:
            pass  # the poller is still waiting when the log is read
    d = diagnose(DiagnoseRequest(target=str(log)))
    if mode == "never":
        assert d.primary_cause is not None and d.primary_cause.value == "stalled", (d.root_cause, log.read_text()[-500:])
        assert "iter_70000.ckpt" in d.root_cause.proximate
        d = diagnose(DiagnoseRequest(target=str(_case(1316))))
        assert d.primary_cause is not None and d.primary_cause.value == "stalled", d.root_cause
    else:
        assert d.primary_cause is None, (d.root_cause, log.read_text())
