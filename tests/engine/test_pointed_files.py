"""When the log names the file that holds the error's own output, reading that file is the first next command.

A real Ray Tune experiment whose trial raises prints 'Error file: .../error.txt' and an errored-trials table with
the same path; the next command must read that file (which really holds the trial's exception). A real run that
saves a JSON file, says where, and then fails elsewhere must not be told to read the saved file.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TUNE = textwrap.dedent("""
    import sys
    from ray import tune

    def trainable(config):
        for step in range(3):
            tune.report({"loss": 1.0 / (step + 1)})
        raise ValueError("label 7 out of range for 5 classes")

    tune.Tuner(trainable, run_config=tune.RunConfig(storage_path=sys.argv[1], name="exp"),
               tune_config=tune.TuneConfig(num_samples=1)).fit()
""")


@pytest.mark.slow
def test_a_ray_tune_trials_error_file_is_the_first_thing_to_read(tmp_path):
    pytest.importorskip("ray")
    script = tmp_path / "tune_fail.py"
    script.write_text(TUNE)
    log = tmp_path / "train.log"
    ray_tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths must stay short
    # its own HOME: a first Ray start writes ~/.ray/auth_token, which a Ray head started later by another test then
    # requires from clients that run with a HOME of their own (tests/grid/test_ray.py)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_TMPDIR": ray_tmp, "HOME": str(tmp_path)}
    with open(log, "wb") as out:
        subprocess.run([sys.executable, str(script), str(tmp_path / "results")], stdout=out, stderr=subprocess.STDOUT,
                       timeout=300, check=False, env=env, cwd=tmp_path)
    text = log.read_text()
    assert "Error file: " in text and "Number of errored trials: 1" in text, text[-3000:]
    d = diagnose(DiagnoseRequest(target=str(log)))
    first = d.next_commands[0] if d.next_commands else ""
    assert first.startswith("tail -n 100 ") and "names this file" in first, d.next_commands
    path = Path(shlex.split(first.split("   #")[0])[-1])
    assert path.name == "error.txt" and f"Error file: {path}" in text, first
    assert "label 7 out of range" in path.read_text(), path  # the file it points to really holds the trial's error


def test_a_file_the_run_saved_is_not_a_pointer_to_its_error(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import json, os
        os.makedirs("out", exist_ok=True)
        for step in range(3):
            print(f"step {step} loss {1.0 / (step + 1):.3f}", flush=True)
        json.dump({"vocab": 5}, open("out/tokenizer_config.json", "w"))
        print("tokenizer config file saved in out/tokenizer_config.json", flush=True)
        raise FileNotFoundError(2, "No such file or directory", "data/val.jsonl")
    """))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, str(script)], stdout=out, stderr=subprocess.STDOUT, timeout=60, check=False,
                       cwd=tmp_path)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert "FileNotFoundError" in log.read_text()
    assert not any("tokenizer_config.json" in c for c in d.next_commands), d.next_commands


def test_a_bare_log_name_a_job_wrapper_points_to_is_read_from_the_run_directory():
    """Kaldi's queue.pl names the job's own log by a bare file name (corpus 744, verbatim from its public report)."""
    log = next((Path(__file__).parents[1] / "corpus").glob("744-*/train.log"))
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.next_commands and d.next_commands[0].startswith("tail -n 100 sge.log   # "), d.next_commands
    assert "from the run's working directory" in d.next_commands[0]


def test_the_extension_gate_skips_only_lines_the_pointer_pattern_cannot_match():
    """commands.may_point spares most tail lines the pointer regex (45 us a line): on every line of every real log, and
    on spellings made to slip past it (an upper-case extension, a long s that re's IGNORECASE reads as 's'), a line it
    skips is a line the regex does not match."""
    from ml_skills.engine.plan import commands

    root = Path(__file__).parents[1]
    lines = ["Error file: /tmp/run/ERROR.TXT", "details in ./out/worker.jſon, the worker failed", "see log.LOG: crashed"]
    for log in sorted(root.glob("corpus/*/train.log")) + sorted(root.glob("healthy/*/train.log")):
        lines += log.read_text("utf-8", errors="replace").splitlines()
    skipped = [line for line in lines if not commands.may_point(line)]
    assert len(skipped) > len(lines) // 2  # the gate does spare the regex
    assert [line for line in skipped if commands._POINTER.search(line)] == []
    assert all(commands.may_point(line) for line in lines[:3]) and all(commands._POINTER.search(line) for line in lines[:3])
