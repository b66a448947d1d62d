"""General readings written after issue 13's twenty-third prospective batch was scored: a batch script's closing
echo after its program's traceback (1350), a classifier's F1 of 0 at every evaluation (1365, 1366), the interpreter's
own refusal of `python -m` for a module that is not there (1363), and three wordings of launchers and services that
name how a run ended (Open MPI's 'exited on signal 9 (Killed)', 1359; Horovod's shutdown, 1354 and 1355; Azure
Storage's AuthenticationFailed, 1367). Real runs where the shape can run here (a shell script around a Python that
fails, a training loop whose classifier never predicts the class it is scored on); otherwise the verbatim public log
of the case (its case.json cites the thread), with controls that must not change."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.engine.batchcase import case, verdict


def _run_script(tmp_path: Path, body: str, programs: dict[str, str]) -> Path:
    """Run a batch script the way a scheduler does (stdout and stderr into one file) and return that file; `programs`
    are the Python files it runs, written beside it."""
    for name, code in programs.items():
        (tmp_path / name).write_text(textwrap.dedent(code), encoding="utf-8")
    script = tmp_path / "job.sh"
    script.write_text("#!/usr/bin/env bash\n" + body.replace("PY", sys.executable), encoding="utf-8")
    log = tmp_path / "slurm-1.out"
    with log.open("w") as out:
        subprocess.run(["bash", str(script)], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, check=False, timeout=120)
    return log


_BARE_RAISE = """
    def load():
        raise TypeError
    print("loading", flush=True)
    load()
"""
_TRAIN = """
    for step in range(1, 7):
        print(f"step {step} loss {2.0 / step:.4f}", flush=True)
"""
_CAUGHT = """
    import traceback
    try:
        raise RuntimeError("DataLoader worker (pid 1) is killed by signal: Segmentation fault.")
    except RuntimeError:
        traceback.print_exc()
    print("Restarting training from last epoch ...", flush=True)
    print("Finished training!", flush=True)
"""


def test_a_scripts_job_finished_after_its_programs_traceback_is_a_crash(tmp_path: Path):
    # 1350: the program died on a bare 'TypeError'; the script went on to echo its own end
    log = _run_script(tmp_path, 'PY train.py\necho "Test job"\necho "Job finished"\n', {"train.py": _BARE_RAISE})
    text = log.read_text()
    assert text.rstrip().endswith("Job finished") and "\nTypeError\n" in text
    assert verdict(log) == ("config-error", "crashed")
    assert verdict(case("1350")) == ("config-error", "crashed")


def test_a_retry_that_trains_after_the_failure_still_outlives_it(tmp_path: Path):
    # the control: the script runs its program again, the second run trains, then the same echo
    log = _run_script(tmp_path, 'PY train.py\nPY train2.py\necho "Job finished"\n', {"train.py": _BARE_RAISE, "train2.py": _TRAIN})
    cls, status = verdict(log)
    assert (cls, status) == (None, "completed")


def test_a_program_that_names_its_own_training_finished_is_not_overruled(tmp_path: Path):
    # the program, not the script, says training finished after the error it caught and logged (healthy 141's shape)
    assert verdict(_run_script(tmp_path, "PY train.py\n", {"train.py": _CAUGHT}))[1] == "completed"


def test_python_dash_m_of_a_module_that_is_not_there_is_an_environment_error(tmp_path: Path):
    # 1363: a KFP component's bootstrap ran 'python3 -m ensurepip' in an image without it
    log = _run_script(tmp_path, 'echo "I0915 11:43:08.285842 1 launcher.go:194] enable caching"\nPY -m ml_skills_no_such_module\n', {})
    assert "No module named ml_skills_no_such_module" in log.read_text()
    assert verdict(log) == ("config-error", "crashed")
    assert verdict(case("1363"))[0] == "config-error"


_CLASSIFIER = """
    import sys, torch
    torch.manual_seed(0)
    informative = sys.argv[1] == "informative"
    n = 2000
    y = (torch.rand(n) < 0.1).long()  # 10% of examples carry the relation the score counts
    x = torch.randn(n, 16) + (y[:, None] * 2.5 if informative else 0)
    tr, dev = slice(0, 1600), slice(1600, n)
    model = torch.nn.Linear(16, 2); opt = torch.optim.SGD(model.parameters(), lr=0.5); lossf = torch.nn.CrossEntropyLoss()
    for epoch in range(1, 9):
        for i in range(0, 1600, 100):
            loss = lossf(model(x[tr][i:i + 100]), y[tr][i:i + 100]); opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            dev_loss = lossf(model(x[dev]), y[dev]).item(); pred = model(x[dev]).argmax(1)
        tp = int(((pred == 1) & (y[dev] == 1)).sum()); fp = int(((pred == 1) & (y[dev] == 0)).sum())
        fn = int(((pred == 0) & (y[dev] == 1)).sum())
        prec = 1.0 if tp + fp == 0 else tp / (tp + fp)  # the TACRED scorer's convention: no prediction, precision 100%
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec)
        print("Evaluating on dev set...")
        print(f"Precision (micro): {100 * prec:.3f}%")
        print(f"   Recall (micro): {100 * rec:.3f}%")
        print(f"       F1 (micro): {100 * f1:.3f}%")
        print(f"epoch {epoch}: train_loss = {loss.item():.6f}, dev_loss = {dev_loss:.6f}, dev_f1 = {f1:.4f}", flush=True)
    print("Training ended with 8 epochs.")
"""


@pytest.mark.parametrize("features", ["noise", "informative"])
def test_an_f1_of_zero_at_every_evaluation_is_a_model_that_never_predicts_the_class(tmp_path: Path, features: str):
    (tmp_path / "train.py").write_text(textwrap.dedent(_CLASSIFIER), encoding="utf-8")
    log = tmp_path / "train.log"
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    with log.open("w") as out:
        subprocess.run([sys.executable, "train.py", features], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
                       check=True, timeout=300, env=env)
    f1s = [float(x.rsplit("=", 1)[1]) for x in log.read_text().splitlines() if "dev_f1 =" in x]
    if features == "noise":
        assert f1s and max(f1s) == 0.0  # the run's own numbers: it never predicted the rare class
        assert verdict(log) == ("evaluation-mismatch", "degraded")
    else:
        assert f1s[-1] > 0.5
        assert verdict(log) == (None, "completed")  # and 'Training ended with 8 epochs.' is its end


def test_the_batchs_verbatim_f1_logs():
    assert verdict(case("1365")) == ("evaluation-mismatch", "degraded")  # TACRED on the sample data
    assert verdict(case("1366")) == ("evaluation-mismatch", "degraded")  # NeuralClassifier's empty vocabulary


def test_launcher_and_service_wordings_name_how_the_run_ended():
    assert verdict(case("1359"))[0] == "oom"  # mpirun: rank 7 'exited on signal 9 (Killed)'
    assert verdict(case("1354"))[0] == "nccl-distributed"  # Horovod shut down: one rank stopped early
    assert verdict(case("1355"))[0] == "nccl-distributed"  # Horovod shut down at the first broadcast
    assert verdict(case("1367"))[0] == "cloud-permissions-quota"  # Azure Storage: AuthenticationFailed


def test_t5x_is_jax_and_horovod_alone_is_named():
    from ml_skills.engine.read import frameworks, scan

    def decide(n: str) -> tuple[str, str | None]:
        return frameworks.decide([scan.scan_log(case(n))])

    assert decide("1357")[0] == "jax"  # 'python3 -m t5x.train' on a TPU pod
    assert decide("1361") == ("other", "horovod")  # Horovod's mpi_lib.so in a native backtrace, no other framework named
    assert decide("1354")[0] == "tensorflow"  # Horovod over TensorFlow: the base framework still decides
