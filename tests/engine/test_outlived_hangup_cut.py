"""Three endings read from real runs: a launcher ended by SIGHUP (its terminal closed), a traceback cut before its
exception line that still says where it was raised, and a failure the run outlived (a relaunch that ran to its end)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

STEPS = """
    import sys, time
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1); opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, 100000):
        x = torch.randn(32, 8); loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
        time.sleep(0.05)
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


@pytest.mark.slow
def test_torchrun_ended_by_sighup_is_a_process_crash_fixed_by_detaching(tmp_path):
    """torchrun's agent gets SIGHUP (what a closed SSH session sends), logs 'Received 1 death signal' and passes
    SIGHUP to its worker: the run died with its terminal, and the first fixes say to launch it detached."""
    _write(tmp_path, "train.py", STEPS)
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        agent = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "train.py"],
                                 cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "step 20 " not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline and agent.poll() is None, log.read_text(errors="replace")
            time.sleep(0.2)
        os.kill(agent.pid, signal.SIGHUP)
        agent.wait(timeout=60)
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
    text = log.read_text(errors="replace")
    assert "death signal" in text or "got signal: 1" in text, text[-2000:]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "process-crash", (d.primary_cause, text[-1500:])
    assert d.run_status.value == "crashed"
    assert "detach-from-terminal" in [f.fix_id for f in d.fixes[:3]], [f.fix_id for f in d.fixes]


SAVE_INTO_MISSING_DIR = """
    import torch
    model = torch.nn.Linear(4, 2)
    for epoch in range(1, 4):
        print(f"epoch {epoch} loss {1.0 / epoch:.4f}", flush=True)
    torch.save(model.state_dict(), "no/such/dir/model.pt")
"""


def test_a_traceback_cut_before_its_exception_line_is_read_from_where_it_was_raised(tmp_path):
    """A real failed torch.save whose log lost its last line (a paste, a `head`): the frames say a checkpoint write
    failed; the verdict is said with a stop's low confidence and the report still says the traceback was cut."""
    _write(tmp_path, "train.py", SAVE_INTO_MISSING_DIR)
    run = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode != 0
    lines = (run.stdout + run.stderr).splitlines()
    last_frame = max(i for i, x in enumerate(lines) if x.lstrip().startswith('File "'))
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines[: last_frame + 2]) + "\n")  # cut after the innermost frame's source line
    assert "Error" not in log.read_text().splitlines()[-1]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint", log.read_text()
    assert d.primary_cause_confidence <= 0.45
    assert any("cut before its exception line" in e.text for e in d.evidence)
    assert "before its exception line" in (d.insufficient_evidence or "")  # what was raised is still asked for


def test_the_same_traceback_read_whole_is_not_weakened(tmp_path):
    """The control: with its exception line the same failure is read from the exception, at its own confidence."""
    _write(tmp_path, "train.py", SAVE_INTO_MISSING_DIR)
    run = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    log = tmp_path / "train.log"
    log.write_text(run.stdout + run.stderr)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint"
    assert d.primary_cause_confidence > 0.45
    assert not any("cut before its exception line" in e.text for e in d.evidence)


FIRST_FAILS = """
    import sys
    attempt = int(sys.argv[1])
    labels = {0: 1, 1: 0, 2: 1}
    first = 3 if attempt > 0 else 1  # the relaunch resumes at its last epoch, which the first launch had reached
    if attempt > 0:
        print(f"Restarting training from epoch {first} ...", flush=True)
    for epoch in range(first, 4):
        for i in range(3):
            key = i if attempt > 0 else i + 1
            y = labels[key]  # the first launch reads a label that is not there
        print(f"epoch {epoch}/3 loss {1.0 / epoch:.4f}", flush=True)
    print("Finished training!", flush=True)
"""


def test_a_failure_the_run_outlived_is_contributing_not_the_cause(tmp_path):
    """A first launch dies on a KeyError in its data; the relaunch runs to its end. The run completed: no primary
    cause, the earlier failure kept as contributing, GO."""
    _write(tmp_path, "train.py", FIRST_FAILS)
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        for attempt in (0, 1):
            subprocess.run([sys.executable, "train.py", str(attempt)], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                           timeout=120, check=False)
    text = log.read_text()
    assert "KeyError" in text and text.rstrip().endswith("Finished training!"), text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value == "completed", (d.run_status, d.primary_cause)
    assert d.primary_cause is None
    assert d.contributing_factors, d.contributing_factors
    assert d.decision.value == "GO"


def test_a_failure_with_no_later_end_is_still_the_cause(tmp_path):
    """The control: the same first launch alone is a failure with a class."""
    _write(tmp_path, "train.py", FIRST_FAILS)
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py", "0"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.run_status.value == "crashed"


def test_launches_that_died_at_start_then_one_that_finished_completed_with_no_cause(tmp_path):
    """Three launches appended to one log: the first dies compiling a broken module, the second on a missing
    package, the third (both fixed) trains to its end. Each failure was followed by a relaunch that ran on, so no
    primary cause is left: the run completed, the earlier failures are contributing."""
    _write(tmp_path, "train.py", """
        import sys
        print("Setting ds_accelerator to cpu (auto detect)", flush=True)
        from utils import loss_at
        if len(sys.argv) > 1:
            import a_package_that_is_not_installed  # noqa: F401
        for step in range(1, 11):
            print(f"step {step}/10 loss {loss_at(step):.4f}", flush=True)
        print("Training completed. train_runtime 0.1 s", flush=True)
    """)
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        for utils, args in (("def loss_at(step):\n        return 1.0 / step\n  x = 1\n", ["peft"]),
                            ("def loss_at(step):\n    return 1.0 / step\n", ["peft"]),
                            ("def loss_at(step):\n    return 1.0 / step\n", [])):
            (tmp_path / "utils.py").write_text(utils)
            subprocess.run([sys.executable, "train.py", *args], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                           timeout=120, check=False)
    text = log.read_text()
    assert "IndentationError" in text and "ModuleNotFoundError" in text and "Training completed" in text, text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value == "completed", (d.run_status, d.primary_cause)
    assert d.primary_cause is None, (d.primary_cause, text)
    assert d.contributing_factors, d.contributing_factors
