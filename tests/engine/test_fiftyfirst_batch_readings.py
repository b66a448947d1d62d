"""Batches 51-52's misses and the older healthy misses they sit beside, read as general behaviours (docs/accuracy.md,
batches 51-52, scored at 6ec855e3 before any change):

- bash's own job-status line for a child a signal ended ('run.sh: line 44: 367038 Hangup   deepspeed --hostfile ...',
  'line 7: 4242 Terminated   python train.py') names the signal with the command after it (2001 abstained);
- a trainer's once-only 'Final validation metrics: {...}' (verl) says its loop returned (healthy 0845: running);
- a loop's own epoch header set off by a rule ('=== EPOCH 199/199 ===') is an epoch header (healthy 0814);
- fp16 loss-scaler skips whose scale grew back, or that lie minutes apart, are a run that went on (healthy 0808, 0838,
  055: unknown); skips seconds apart with the scale only falling (healthy 236, Apex's start-up calibration) say nothing.

The cases are verbatim public logs (they fail on 6ec855e3); the signals are real: a bash script whose training child is
sent SIGHUP or SIGTERM by another process."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.engine.batchcase import case, verdict


def test_bashs_hangup_line_for_a_launcher_is_a_process_killed_by_sighup():
    assert verdict(case("2001")) == ("process-crash", "crashed")


def _default_signals() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _killed_child(tmp_path: Path, sig: str) -> Path:
    """A real bash script running a training child that another process sends `sig` after a second."""
    marker = f"ml_skills_{sig.lower()}_{tmp_path.name}"
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import sys, time
        for step in range(200):
            print(f"step {step} loss {1 / (step + 1):.4f}", flush=True)
            time.sleep(0.05)
        print("training finished", flush=True)
    """), encoding="utf-8")
    (tmp_path / "run.sh").write_text(
        f'(sleep 1; pkill -{sig} -f "{marker}") &\n"{sys.executable}" train.py {marker}\necho "exit $?"\n', encoding="utf-8")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        # the signals' default action, whatever this process inherited (under nohup SIGHUP is ignored, and an ignored
        # signal stays ignored through bash and exec: the child would never die of it)
        subprocess.run(["bash", "run.sh"], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, timeout=120, check=False,
                       preexec_fn=_default_signals)
    return log


@pytest.mark.parametrize("sig, word", [("HUP", "Hangup"), ("TERM", "Terminated")])
def test_a_real_childs_signal_as_bash_reports_it_ends_the_run(tmp_path: Path, sig: str, word: str):
    log = _killed_child(tmp_path, sig)
    text = log.read_text()
    # bash's job-status line ('run.sh: line 2: 4242 Hangup   python train.py ...'; SIGTERM's may be the word alone)
    assert word in text and "training finished" not in text
    assert verdict(log) == ("process-crash", "crashed")


def test_final_validation_metrics_printed_once_the_loop_returned_is_a_completed_run(tmp_path: Path):
    log = case("0845", "healthy")
    assert verdict(log)[1] == "completed"
    # the same log cut before that line is a run still stepping (the control)
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if "Final validation metrics" in x)
    (tmp_path / "train.log").write_text("".join(lines[:cut]), encoding="utf-8")
    assert verdict(tmp_path / "train.log")[1] != "completed"


def test_an_epoch_header_set_off_by_a_rule_at_its_total_with_its_results_is_a_completed_run(tmp_path: Path):
    log = case("0814", "healthy")
    assert verdict(log)[1] == "completed"
    # cut right after the last header, before that epoch's results: the epoch has only begun
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    head = max(i for i, x in enumerate(lines) if "=== EPOCH" in x)
    (tmp_path / "train.log").write_text("".join(lines[: head + 1]), encoding="utf-8")
    assert verdict(tmp_path / "train.log")[1] != "completed"


@pytest.mark.parametrize("n", ["0808", "0838", "055"])
def test_loss_scaler_skips_with_training_between_them_are_a_recovered_run(n: str):
    assert verdict(case(n, "healthy")) == (None, "recovered")


def test_loss_scaler_skips_seconds_apart_only_falling_say_nothing_of_recovery():
    assert verdict(case("236", "healthy")) == (None, "unknown")


def _ipython_run(tmp_path: Path) -> Path:
    """A real script run under IPython, whose traceback prints frames as '/x.py:7, in f(a)' and '---> 7 ...' lines: a
    shape error inside NumPy's broadcast_shapes after three steps."""
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import numpy as np
        def promote(a, b):
            return np.broadcast_shapes(a.shape, b.shape)
        for step in range(3):
            print(f"step {step} loss {1.0 / (step + 1):.3f}", flush=True)
        promote(np.zeros((1, 50, 32)), np.zeros((50, 32, 4)))
    """), encoding="utf-8")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        subprocess.run([sys.executable, "-m", "IPython", "--colors=NoColor", "--no-banner", "train.py"], stdout=out,
                       stderr=subprocess.STDOUT, cwd=tmp_path, timeout=120, check=False,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "IPYTHONDIR": str(tmp_path / ".ipython")})
    return log


def test_an_ipython_traceback_cut_before_its_exception_line_ended_the_run_and_asks_for_it(tmp_path: Path):
    """1970 (a Colab traceback of a Keras 3 dynamo assert) and 1064 (a JAX one) end inside IPython-style frames: the run
    crashed, and the exception line is what is missing; NumPy's broadcast_shapes frame is no collective wait."""
    pytest.importorskip("IPython")
    from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

    log = _ipython_run(tmp_path)
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    end = max(i for i, x in enumerate(lines) if x.startswith("ValueError:"))
    assert any(x.lstrip().startswith("---->") or x.lstrip().startswith("-->") for x in lines[:end])
    cut = tmp_path / "cut.log"
    cut.write_text("".join(lines[:end]), encoding="utf-8")  # the paste that lost its last line
    d = diagnose(DiagnoseRequest(target=str(cut)))
    assert (d.primary_cause, d.run_status.value) == (None, "crashed")
    assert "ends inside a traceback" in (d.insufficient_evidence or "")
    assert verdict(log)[1] == "crashed"  # the whole output names its exception
    assert verdict(case("1970"))[1] == "crashed"


def test_an_exception_through_a_multiprocessing_pipe_whose_peer_died_is_that_process_crash(tmp_path: Path):
    """Batch 54: PaddleSpeech's data reader waiting on a multiprocessing manager's queue ('IOError: got end of file during
    message' in managers.py, 2023, read as config-error's catch-all) and Open MPI's 'An MPI communication peer process has
    unexpectedly disconnected' (2024, abstained) report another process's death. The real run: a manager killed while its
    client still calls it."""
    from tests.engine.batchcase import run_script

    log = run_script(tmp_path, """
        import multiprocessing as mp, os, signal, time
        if __name__ == "__main__":
            manager = mp.Manager()
            queue = manager.Queue()
            for step in range(3):
                queue.put(step)
                print(f"step {queue.get()} loss {0.5 / (step + 1):.3f}", flush=True)
            os.kill(manager._process.pid, signal.SIGKILL)  # the reader's manager dies (the OOM killer, a crash)
            time.sleep(0.5)
            queue.get()
    """)
    text = log.read_text()
    assert "managers.py" in text and "Traceback" in text
    assert verdict(log) == ("process-crash", "crashed")
    assert verdict(case("2023")) == ("process-crash", "crashed")
    assert verdict(case("2024")) == ("process-crash", "crashed")
