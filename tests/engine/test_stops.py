"""A log that stops with no error: real hangs, run here, must read as stalled (weakly); a run that
goes on past the same point must not.

Each log is written by a real process: a rank 0 of two whose peer never starts (it blocks in
init_process_group), and a DataLoader whose worker never returns a batch (the main process
blocks in the queue's get until it is interrupted).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ml_skills.engine.analyse.stops import CONFIDENCE_CAP
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")

INIT = textwrap.dedent("""
    import datetime, logging, signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import torch.distributed as dist
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stdout)
    log = logging.getLogger("train")
    port, world = int(sys.argv[1]), int(sys.argv[2])
    log.info("world_size=%d rank=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d", world, port)
    log.info("calling init_process_group(backend='gloo')")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    for step in range(1, 4):
        log.info("step %d loss %.4f", step, 2.0 / step)
    dist.destroy_process_group()
""")

LOADER = textwrap.dedent("""
    import logging, signal, sys, threading
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import torch
    from torch.utils.data import DataLoader, Dataset
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stdout)
    log = logging.getLogger("train")

    class Shards(Dataset):
        def __len__(self):
            return 64
        def __getitem__(self, i):
            if i >= 8:  # a read that never returns (a dead NFS mount, a lock held across fork)
                threading.Event().wait()
            return torch.randn(4), torch.randn(1)

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(DataLoader(Shards(), batch_size=4, num_workers=1), start=1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        log.info("step %d loss %.4f", step, loss.item())
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(tmp_path: Path, code: str, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, Path]:
    script, log = tmp_path / "train.py", tmp_path / "train.log"
    script.write_text(code)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(script), *args], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})
    return proc, log


def _wait_for(log: Path, proc: subprocess.Popen, text: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.2)


def test_a_rank_that_waits_for_a_peer_that_never_starts_is_stalled_at_start_up(tmp_path):
    proc, log = _start(tmp_path, INIT, str(_free_port()), "2", env={"TORCH_CPP_LOG_LEVEL": "INFO"})
    try:
        _wait_for(log, proc, "calling init_process_group")
        time.sleep(3)  # it is blocked: rank 1 never connects
        assert proc.poll() is None, log.read_text()
    finally:
        proc.kill()  # a scheduler's time limit, or a person giving up
        proc.wait()
    text = log.read_text()
    assert "step 1" not in text and "Error" not in text, text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled", text
    assert d.run_status.value == "hung"
    assert 0 < d.primary_cause_confidence <= CONFIDENCE_CAP  # where a log stops is not proof
    last = len(text.splitlines())
    assert d.root_cause.proximate_line is not None and d.root_cause.proximate_line.line_no >= last - 1
    assert "[c10d]" in d.root_cause.proximate and "never joined" in d.root_cause.root
    assert d.fixes[0].fix_id == "dump-stacks"


def test_the_same_start_up_that_goes_on_to_train_is_not_stalled(tmp_path):
    proc, log = _start(tmp_path, INIT, str(_free_port()), "1", env={"TORCH_CPP_LOG_LEVEL": "INFO"})
    assert proc.wait(timeout=120) == 0, log.read_text()
    assert "step 3" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None or d.primary_cause.value != "stalled", log.read_text()
    assert d.run_status.value != "hung"


def test_a_stack_interrupted_in_the_loader_queue_is_stalled_whole_or_cut_before_its_exception(tmp_path):
    proc, log = _start(tmp_path, LOADER)
    try:
        _wait_for(log, proc, "step 2 loss")
        time.sleep(2)  # batch 3 never comes: the worker is stuck in __getitem__
        assert proc.poll() is None, log.read_text()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = log.read_text().splitlines()
    assert any("KeyboardInterrupt" in x for x in lines), lines[-10:]
    whole = diagnose(DiagnoseRequest(target=str(log)))
    assert whole.primary_cause is not None and whole.primary_cause.value == "stalled", lines[-10:]

    # the same output pasted into an issue, cut after the innermost frame (before 'KeyboardInterrupt')
    last_frame = max(i for i, x in enumerate(lines) if x.lstrip().startswith('File "'))
    cut = tmp_path / "pasted.log"
    cut.write_text("\n".join(lines[: last_frame + 2]) + "\n")
    assert "KeyboardInterrupt" not in cut.read_text()
    d = diagnose(DiagnoseRequest(target=str(cut)))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled", lines[: last_frame + 2][-8:]
    assert d.run_status.value == "hung"
    assert d.primary_cause_confidence <= CONFIDENCE_CAP
    assert d.root_cause.proximate_line.line_no == last_frame + 2  # the innermost frame's code line, quoted
    assert "waited" in d.root_cause.root


def test_a_tuning_run_whose_every_trial_is_still_pending_where_its_log_stops_is_stalled():
    """Corpus 951 (ray-project/ray, a public report; thirteenth batch, abstained before this): Ray Tune's status
    block repeats 'Number of trials: 1/1 (1 PENDING)' with 0/4 CPUs in use, its trial table below, until the log
    stops. The status line sits above the table, so the table is read with it. Corpus 775, a Tune run whose status
    says RUNNING above its table, is not read as waiting."""
    corpus = Path(__file__).resolve().parents[1] / "corpus"
    pending = diagnose(DiagnoseRequest(target=str(next(corpus.glob("951-*")) / "train.log")))
    assert pending.primary_cause is not None and pending.primary_cause.value == "stalled"
    assert pending.run_status.value == "hung" and pending.primary_cause_confidence <= CONFIDENCE_CAP
    assert any("1 PENDING" in e.text for e in pending.evidence)
    running = diagnose(DiagnoseRequest(target=str(next(corpus.glob("775-*")) / "train.log")))
    assert not any("stopped-at-sync-point" in e.text for e in running.evidence)
