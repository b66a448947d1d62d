"""An exception that ends a thread other than the main one ('Exception in thread Thread-2 (...)') ends that thread only:
the program goes on when its main thread does not need it (batch 19's healthy 460, a reader thread's UnicodeDecodeError
before a LoRA fine-tune that trains), and hangs when it waits for it. Real child processes, real torch on the CPU."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

# samples on disk, the fifth not UTF-8: a thread that reads them dies at it
PRELUDE = """
import queue, threading, time
import torch
for i in range(30):
    open(f"sample{i}.txt", "wb").write(b"ok \\xad\\xff" if i == 4 else b"ok")
torch.manual_seed(0)
x = torch.randn(256, 8); y = (x[:, 0] > 0).float()
model = torch.nn.Linear(8, 1); opt = torch.optim.SGD(model.parameters(), lr=0.5)
def step():
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
    opt.zero_grad(); loss.backward(); opt.step()
    return loss.item()
"""


def _run(tmp_path: Path, body: str, timeout: float) -> Path:
    log = tmp_path / "train.log"
    with log.open("wb") as out:
        try:
            subprocess.run([sys.executable, "-c", textwrap.dedent(PRELUDE) + textwrap.dedent(body)], stdout=out,
                           stderr=subprocess.STDOUT, cwd=tmp_path, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            pass  # the hung run, killed as a scheduler's time limit would
    return log


def test_a_side_threads_exception_the_training_went_on_past_is_no_failure(tmp_path: Path) -> None:
    """A thread that reads the samples once for a summary (not the training's input) dies; the main thread prints its
    settings and trains with a bar that prints no loss, as healthy 460's LoRA run did."""
    log = _run(tmp_path, """
        from tqdm import tqdm
        def summary():
            print(sum(len(open(f"sample{i}.txt", encoding="utf-8").read()) for i in range(30)))
        t = threading.Thread(target=summary, name="Thread-2 (summary)"); t.start(); t.join()
        config = {f"option_{i}": i for i in range(24)}  # the run prints its settings, as 460 printed its model's
        for k, v in config.items():
            print(f"{k}: {v}", flush=True)
        for _ in tqdm(range(30), mininterval=0):
            step(); time.sleep(0.02)
    """, timeout=300)
    text = log.read_text(errors="replace")
    assert "Exception in thread Thread-2 (summary)" in text and "UnicodeDecodeError" in text and "30/30" in text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.evidence
    assert d.run_status.value != "crashed"


def test_a_feeding_threads_exception_the_main_thread_then_waits_for_is_the_failure(tmp_path: Path) -> None:
    """A prefetch thread that feeds the training dies at the fifth sample; the main thread takes the batches already
    read (two steps after the exception), then waits for one forever."""
    log = _run(tmp_path, """
        q = queue.Queue(maxsize=1)
        def feed():
            for i in range(30):
                q.put(open(f"sample{i}.txt", encoding="utf-8").read())
        threading.Thread(target=feed, name="Thread-2 (feed)", daemon=True).start()
        for n in range(1, 31):
            q.get()
            print(f"step {n}/30 loss {step():.4f}", flush=True)
    """, timeout=20)
    text = log.read_text(errors="replace")
    assert "Exception in thread Thread-2 (feed)" in text and "step 4/30" in text and "step 5/30" not in text
    # the batches already read, then nothing (one or two of them print after the traceback: the thread's stderr and the
    # main thread's stdout race)
    assert text.split("UnicodeDecodeError")[1].count("step ") <= 2
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "data-pipeline", d.evidence
