"""Readings written after batches 63-64 were scored (at 5d20743) and after reading the corpus's strong abstentions, so
the cases they fix are regression tests, not evidence:

- A native backtrace through ProcessGroupNCCL's watchdog thread before SIGABRT is the watchdog aborting the process,
  an NCCL failure (2104 read process-crash from the SIGABRT): a catalog signature, its examples in tests/catalog.
- google.api_core's exceptions are named for their status, not '...Error' ('InvalidArgument: 400 Accelerator ... is
  not supported for machine type ...'): standing alone at a log's end, such a line ended the run like any exception
  line, and an HTTP 400 refusal is a config error (461 abstained: 'the log stops with no error').
- The shell's 'sh: 1: Rscript: not found' / 'bash: torchrun: command not found' ending a log is a program the step
  runs missing from the environment (548 abstained); the same line early in a job script that then trains to its end
  is noise the run went on past.

The runs are real: the google-api-core client's own exception printed by a job-submitting script, alone and in its
traceback; a driver whose step runs a program that is not installed, through /bin/sh; a job script whose helper is
missing before a PyTorch loop that completes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.batchcase import case, run_script, verdict

_SUBMIT = """
    import sys
    from google.api_core import exceptions
    print("Creating CustomJob", flush=True)
    print("CustomJob created. Resource name: projects/123/locations/us-central1/customJobs/456", flush=True)
    spec = {"machine_type": "n1-standard-4", "accelerator_type": "NVIDIA_TESLA_K80"}
    def submit(spec):
        raise exceptions.InvalidArgument(
            f'Accelerator "{spec["accelerator_type"]}" is not supported for machine type "{spec["machine_type"]}"')
    try:
        submit(spec)
    except exceptions.GoogleAPICallError as e:
        if sys.argv[1] == "short":
            print(f"{type(e).__name__}: {e}", flush=True)  # a wrapper that logs the error's short form
            sys.exit(1)
        raise
"""

_STEP = """
    import subprocess, sys
    print("Entering Run History Context Manager.", flush=True)
    print("Preparing to call script [ train.R ] with arguments: ['--data', 'train.csv']", flush=True)
    sys.exit(subprocess.call("Rscript_not_installed train.R --data train.csv", shell=True))
"""

_JOB = """
    import subprocess, torch
    subprocess.call("conda_helper_not_installed activate env", shell=True)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(256, 8), torch.randint(0, 2, (256,))
    for epoch in range(1, 11):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"Epoch {epoch}/10 - loss: {loss.item():.4f}", flush=True)
    print("Training finished.", flush=True)
"""


def test_a_native_backtrace_through_the_nccl_watchdog_is_an_nccl_failure():
    assert verdict(case("2104")) == ("nccl-distributed", "crashed")


@pytest.mark.parametrize("form", ["short", "traceback"])
def test_an_api_refusal_with_http_400_is_a_config_error(tmp_path: Path, form: str):
    pytest.importorskip("google.api_core")
    log = run_script(tmp_path, _SUBMIT, form)
    assert 'InvalidArgument: 400 Accelerator "NVIDIA_TESLA_K80"' in log.read_text()
    assert verdict(log) == ("config-error", "crashed")


def test_the_one_line_case_of_such_a_refusal():
    assert verdict(case("461")) == ("config-error", "crashed")


def test_a_step_whose_program_is_not_installed_is_a_config_error(tmp_path: Path):
    log = run_script(tmp_path, _STEP)
    assert "Rscript_not_installed: not found" in log.read_text()
    assert verdict(log) == ("config-error", "crashed")
    assert verdict(case("548"))[0] == "config-error"


def test_a_missing_helper_the_job_went_on_past_is_no_failure(tmp_path: Path):
    log = run_script(tmp_path, _JOB)
    text = log.read_text()
    assert "conda_helper_not_installed: not found" in text and text.rstrip().endswith("Training finished.")
    assert verdict(log) == (None, "completed")
