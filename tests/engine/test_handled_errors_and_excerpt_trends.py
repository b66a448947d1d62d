"""Readings added for issue 13's batch 135, each a general behaviour, on real logs and real processes.

- A Ctrl-C that arrives while a library is handling an exception it raised and caught itself ends the run; the caught
  exception ended nothing (corpus 2380: TensorFlow's tf.gather catches the AttributeError of a numpy array's missing
  `sparse_read`, and the person's KeyboardInterrupt comes 'during handling' of it). One the run's own code was handling
  stays evidence: it may be why the person stopped the run.
- An exception R reports from Python (reticulate: 'Error in py_set_attr(x, name, value) :' then the Python exception
  indented, then 'Execution halted') ends the run as a bare exception line would (corpus 2364).
- A short excerpt whose loss rises at every log is diverging (corpus 2374, BigScience 104B); a spike whose loss has
  fallen at every log since its peak is one the run is coming back from, not a divergence (healthy 1120, BigScience 13B).
- Megatron's planned exit after its checkpoint save ends the job well (healthy 1121).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ml_skills.engine.analyse import divergence
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.models import MetricPoint, Severity

TESTS = Path(__file__).resolve().parents[1]

LIBRARY = """
    import time
    def gather(x):
        try:
            return x.sparse_read()
        except AttributeError:  # a library's own fallback: a plain list has no sparse_read
            print("converting the list", flush=True)
            time.sleep(60)
            return list(x)
"""

TRAIN = """
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a terminal's Ctrl-C (a CI job may start with SIGINT ignored)
    sys.path.insert(0, sys.argv[1])
    import fallbacklib
    for step in range(50):
        print(f"step {step} loss {1.0 / (step + 1):.4f}", flush=True)
        if step == 5:
            {call}
"""

OWN_HANDLER = ("try:\n"
               "            [1, 2].sparse_read()\n"
               "        except AttributeError:  # the run's own code handles it\n"
               '            print("converting the list", flush=True)\n'
               "            import time; time.sleep(60)")


def _interrupted_run(tmp_path: Path, call: str) -> Path:
    """Run the script for real, send it SIGINT (a person's Ctrl-C) while the handler runs, and return its log."""
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "fallbacklib.py").write_text(textwrap.dedent(LIBRARY))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN).replace("{call}", call))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "train.py", str(lib)], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while "converting the list" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        finally:
            proc.kill()
    text = log.read_text()
    assert "During handling of the above exception" in text and text.rstrip().endswith("KeyboardInterrupt"), text
    return log


def test_a_ctrl_c_during_a_librarys_own_handler_blames_no_handled_exception(tmp_path):
    d = diagnose(DiagnoseRequest(target=str(_interrupted_run(tmp_path, "fallbacklib.gather([1, 2])"))))
    assert d.primary_cause is None, d.primary_cause
    assert not any("AttributeError" in e.text for e in d.evidence), [e.text for e in d.evidence]


def test_an_exception_the_runs_own_code_was_handling_stays_evidence(tmp_path):
    d = diagnose(DiagnoseRequest(target=str(_interrupted_run(tmp_path, OWN_HANDLER))))
    assert any("AttributeError" in e.text for e in d.evidence), [e.text for e in d.evidence]


def test_the_tensorflow_run_interrupted_in_gathers_fallback_is_not_a_config_error():
    log = next((TESTS / "corpus").glob("2380-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None or d.primary_cause.value != "config-error"


def test_a_python_exception_r_reports_ends_the_run():
    log = next((TESTS / "corpus").glob("2364-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value == "crashed"
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"
    assert any("Model.layers" in e.text for e in d.evidence)


def _points(losses: list[float], first_step: int = 0) -> list[MetricPoint]:
    return [MetricPoint(source="t", line_no=i + 1, step=first_step + 10 * i, values={"loss": v}) for i, v in enumerate(losses)]


@pytest.mark.parametrize(("losses", "diverging"), [
    ([6.37, 6.60, 7.31, 9.12, 10.24], True),  # every log higher, to 1.6x
    ([6.37, 6.60, 7.31, 7.20, 10.24], False),  # one fall: per-batch spread, not a climb
    ([6.37, 6.50, 6.70, 6.90, 7.10], False),  # rising, but by less than half again
    ([2.0, 2.5, 3.5, 4.0], False),  # too few logs to call
])
def test_a_short_excerpt_diverges_only_when_its_loss_climbs_at_every_log(losses, diverging):
    found = divergence.loss_blowup(_points(losses, first_step=6900))
    assert (found is not None and found.severity is Severity.CRITICAL) is diverging, found


def test_a_whole_short_run_whose_total_loss_climbs_from_step_0_is_no_divergence():
    """Healthy 765 (a sparse additive model): 'All Loss' 38 -> 230 at every log from step 0 while the fit's own losses
    fall: a growing penalty, read within the run's own counters."""
    assert divergence.loss_blowup(_points([38.2, 64.5, 98.0, 140.1, 185.3, 230.2], first_step=0)) is None
    log = next((TESTS / "healthy").glob("765-*")) / "train.log"
    assert diagnose(DiagnoseRequest(target=str(log))).primary_cause is None


@pytest.mark.parametrize(("tail", "coming_back"), [
    ([8.72, 7.65, 7.19, 6.85], True),  # three falls since the peak, a third of the rise taken back
    ([8.72, 7.65, 7.80, 6.85], False),  # not a fall at every log
    ([8.72, 8.60, 8.55, 8.50], False),  # falls, but less than a fifth of the rise back
    ([8.72, 7.65, 7.19], False),  # only two logs since the peak
])
def test_a_spike_is_coming_back_only_when_it_falls_at_every_log_since_its_peak(tail, coming_back):
    found = divergence.loss_blowup(_points([2.80, 2.78, 2.77, 2.77, 2.78, *tail]))
    assert found is not None
    assert (found.severity is Severity.MINOR) is coming_back, found.detail


def test_the_bigscience_spike_reads_as_recovering_and_the_104b_climb_as_diverging():
    spike = diagnose(DiagnoseRequest(target=str(next((TESTS / "healthy").glob("1120-*")) / "train.log")))
    assert spike.primary_cause is None and spike.run_status.value == "running"
    climb = diagnose(DiagnoseRequest(target=str(next((TESTS / "corpus").glob("2374-*")) / "train.log")))
    assert climb.primary_cause is not None and climb.primary_cause.value == "optimization-divergence"
    assert climb.framework is not None and "megatron" in str(climb.framework)


def test_megatrons_planned_exit_after_its_save_ends_the_job_well():
    """Healthy 1121 (BigScience 13B): the checkpoint saved, then '[exiting program after 1190.04 minutes]'
    (--exit-duration-in-mins), then a watchdog's alerts about the queue: the job ended by design, not still running."""
    d = diagnose(DiagnoseRequest(target=str(next((TESTS / "healthy").glob("1121-*")) / "train.log")))
    assert d.primary_cause is None and d.run_status.value == "completed"


WRONG_TYPE = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    class Choice:  # what an unsampled search space is: an object where a number belongs
        pass

    config = {"batch_size": Choice()}
    data = TensorDataset(torch.randn(64, 4))
    loader = DataLoader(data, batch_size=config["batch_size"], shuffle=True)
    for (x,) in loader:
        print("step", x.shape)
"""


def test_a_setting_given_an_object_where_a_number_belongs_is_a_config_error(tmp_path):
    """Corpus 2387 (Ray Tune reading its search space unsampled): the DataLoader refuses the object in its __init__, with
    frames that read as data loading; the object's repr in 'but got' makes it the run's configuration. Run for real."""
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(textwrap.dedent(WRONG_TYPE))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
    assert "object at 0x" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", [e.text for e in d.evidence]
