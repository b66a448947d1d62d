"""Run status from what the run itself says, on real runs: it reached its end, a later attempt finished,
or a process is still there to be hung. The age of a file alone is never a hang."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ml_skills.engine.analyse.lastprogress import STALL_MIN_SECONDS
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TRAIN = """
    import sys, time
    import torch
    epochs = int(sys.argv[1]); pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    torch.manual_seed(0)
    x = torch.randn(256, 8); y = (x.sum(1) > 0).long()
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(1, epochs + 1):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        acc = (model(x).argmax(1) == y).float().mean().item()
        print(f"Epoch {epoch}/{epochs} - loss: {loss.item():.4f} - acc: {acc:.4f}", flush=True)
        time.sleep(pause)
"""


def _script(tmp_path: Path, text: str = TRAIN) -> Path:
    p = tmp_path / "train.py"
    p.write_text(textwrap.dedent(text))
    return p


def _shell(tmp_path: Path, shell: str) -> Path:
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run(["bash", "-c", shell], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=300, check=False)
    return log


def test_a_run_whose_counter_reaches_its_configured_total_completed(tmp_path):
    """No 'Training completed' message: the last epoch printed is the last of its total."""
    _script(tmp_path)
    log = _shell(tmp_path, f"{sys.executable} train.py 6")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value == "completed", log.read_text()
    assert d.primary_cause is None


def test_a_run_cut_before_its_total_is_not_completed(tmp_path):
    """The same run stopped at epoch 3 of 6 (a kill with no message): not completed, and no failure class made up."""
    _script(tmp_path)
    log = _shell(tmp_path, f"timeout -s KILL 30 {sys.executable} train.py 6 0 2>&1 | head -n 3")
    assert log.read_text().splitlines()[-1].startswith("Epoch 3/6"), log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value != "completed"
    assert d.run_status.value != "crashed"


def test_a_log_that_ends_mid_training_with_no_error_reads_running(tmp_path):
    """The run cut at epoch 3 of 6 with no message: as far as its log goes it was training, so its status is running
    (what a person labelling the log says), no class is made up, and the report asks for the process state because
    a log alone cannot tell a live run from one killed without a word."""
    _script(tmp_path)
    log = _shell(tmp_path, f"timeout -s KILL 30 {sys.executable} train.py 6 0 2>&1 | head -n 3")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value == "running" and d.primary_cause is None
    assert "--pid" in (d.insufficient_evidence or ""), d.insufficient_evidence


STEPS = """
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1); opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, 1001):
        x = torch.randn(32, 8); loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"step {step}/1000 loss {loss.item():.4f}", flush=True)
"""


def test_a_run_folder_whose_log_ends_mid_training_still_says_no_checkpoint_was_written(tmp_path):
    """Read running from its log, the run may still be dead: an output folder with no checkpoint is still said."""
    _script(tmp_path, STEPS)
    _shell(tmp_path, f"timeout -s KILL 30 {sys.executable} train.py 2>&1 | head -n 40")
    (tmp_path / "checkpoints").mkdir()
    d = diagnose(DiagnoseRequest(target=str(tmp_path)))
    assert d.run_status.value == "running"
    assert any("no checkpoint was written" in f.title for f in d.findings), [f.title for f in d.findings]


def test_a_retry_that_finished_after_a_killed_attempt_is_completed(tmp_path):
    """A retry loop: the first attempt is killed (bash prints 'Killed'), the second runs all its epochs."""
    _script(tmp_path)
    shell = (f"for limit in 3 120; do echo \"attempt with a $limit s limit\"; "
             f"timeout -s KILL $limit {sys.executable} train.py 8 0.6 && break; done")
    log = _shell(tmp_path, shell)
    text = log.read_text()
    assert "Killed" in text and text.rstrip().splitlines()[-1].startswith("Epoch 8/8"), text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value == "completed", (d.primary_cause, d.root_cause.proximate)


STUCK = """
    import time
    for step in range(1, 13):
        print(time.strftime("%Y-%m-%d %H:%M:%S"), f"step {step}/1000 loss {2.0 / step:.4f}", flush=True)
        time.sleep(0.25)
    time.sleep(600)  # blocked after step 12 (a lock, a peer), still holding its stdout
"""


@pytest.mark.slow
def test_an_old_last_line_is_a_hang_only_while_a_process_still_holds_the_log(tmp_path):
    """The same quiet log: hung while the process that writes it is alive, not hung once it has gone."""
    _script(tmp_path, STUCK)
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "step 12/" not in log.read_text() or time.time() - log.stat().st_mtime < STALL_MIN_SECONDS + 2:
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.5)
        alive = diagnose(DiagnoseRequest(target=str(log)))
    finally:
        proc.kill()
        proc.wait()
    gone = diagnose(DiagnoseRequest(target=str(log)))
    assert alive.run_status.value == "hung" and any(a.kind.value == "no-progress" for a in alive.anomalies)
    assert f"pid {proc.pid}" in next(a.detail for a in alive.anomalies if a.kind.value == "no-progress")
    assert gone.run_status.value != "hung" and not any(a.kind.value == "no-progress" for a in gone.anomalies)


@pytest.mark.parametrize("case", ["164", "272", "335", "341"])
def test_a_schedulers_time_limit_verdict_ends_the_run_whatever_it_stalled_on(case):
    """Real SLURM/LSF outputs (corpus 164, 272, 335, 341): the scheduler ended the job at its limit, so the run
    is over (crashed), not hung, though what it was doing until then reads as stalled."""
    log = next((Path(__file__).parents[1] / "corpus").glob(f"{case}-*/train.log"))
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled"
    assert d.run_status.value == "crashed"


SKIPS_A_NAN_BATCH = """
    import math
    import torch
    torch.manual_seed(0)
    x = torch.randn(64 * 16, 8); y = x.sum(1, keepdim=True)
    x[40 * 16 + 5, 3] = float("nan")  # one corrupt record, in the batch of step 40
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(64):
        xb, yb = x[step * 16 : (step + 1) * 16], y[step * 16 : (step + 1) * 16]
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad(); loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")))
        if math.isfinite(gn):
            opt.step()  # a non-finite gradient is skipped, as a loss scaler does
        print(f"step {step} loss {loss.item():.4f} grad_norm {gn:.4f}", flush=True)
"""


def test_a_nan_the_run_skipped_past_is_recovered_not_diverged(tmp_path):
    _script(tmp_path, SKIPS_A_NAN_BATCH)
    log = _shell(tmp_path, f"{sys.executable} train.py")
    assert "step 40 loss nan" in log.read_text() and "step 63 loss" in log.read_text(), log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    assert d.run_status.value == "recovered"


BAR = """
    import time
    from tqdm import tqdm
    print("Process rank: 0, device: cpu, n_gpu: 0, distributed training: True", flush=True)
    for step in tqdm(range(28)):
        time.sleep(3)
"""


def test_a_bar_that_moved_past_its_first_step_is_no_wait_at_a_sync_point(tmp_path):
    """Healthy 398 (LLaMA-Factory on 8 ranks): the bar's '0/28' frame, then '1/28 [00:31<14:22]', then the file ends.
    A distributed run's bar at 0 is where ranks wait for each other, but this one went past it: the run was training
    when its log was cut. A real run killed after its first step, its bar's carriage returns stored as line breaks as a
    paste or a file index stores them (each frame on its own line)."""
    _script(tmp_path, BAR)
    # killed once its bar shows step 1 (not after a fixed time: a loaded machine starts Python slowly), well before step 2
    log = _shell(tmp_path, f"{sys.executable} train.py > raw.log 2>&1 & pid=$!; "
                           "for i in $(seq 1 600); do grep -q '1/28' raw.log && break; sleep 0.1; done; "
                           "{ kill -9 $pid; wait $pid; } 2>/dev/null; tr '\\r' '\\n' < raw.log")  # not the shell's 'Killed' notice
    text = log.read_text(errors="replace")
    assert "0/28" in text and "1/28" in text and "2/28" not in text, text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None and d.run_status.value in ("running", "unknown"), d.run_status


def test_a_step_line_that_prints_its_own_total_time_is_no_summary_of_the_run(tmp_path):
    """A loop that prints 'Steps 200, Total time 5.96, ... Loss 2.155e+01' at every step (the step's time, TF1 registration
    code's shape: healthy case 1118), cut while it runs: its last lines are steps, not the run's closing summary."""
    _script(tmp_path, """
        import time
        for step in range(10, 310, 10):
            t = time.strftime("%Y-%m-%d %H:%M:%S")
            print(f"*Dec01-2035*  {t} Steps {step}, Total time 5.9{step % 7}, data 0.01%. Loss {200.0 / step:.3e} lr 1.000e-04", flush=True)
    """)
    log = _shell(tmp_path, f"{sys.executable} train.py 2>&1 | head -n 22")
    assert "Steps 220, Total time" in log.read_text().splitlines()[-1]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value != "completed" and d.primary_cause is None, (d.run_status, d.evidence[:3])
