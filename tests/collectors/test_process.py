"""The process collector on real child processes: busy, sleeping, stalled, spinning, stopped,
zombie, exiting mid-inspection, and another user's, through the library and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from ml_skills.collectors import process
from ml_skills.engine.pipeline import DiagnoseRequest, analyse, diagnose
from ml_skills.errors import InputError, TargetNotFound
from ml_skills.models import Evidence, RunStatus

from tests.security.figures import record

TRAIN = Path(__file__).parent / "procs" / "train.py"
NOBODY = 65534
FAST = {"sample_seconds": 0.6, "samples": 3}


class Children:
    """Starts real training children with stdout as their log; kills whatever is left at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, mode: str, log: Path, *, python: str = sys.executable, user: int | None = None, name: str | None = None,
              wait_for: str | None = "step 3 ") -> subprocess.Popen[bytes]:
        script = TRAIN
        if name:  # the same script under another name, for lookups by name
            script = log.parent / name
            shutil.copy(TRAIN, script)
            os.chmod(script, 0o755)
        with open(log, "wb") as out:
            p = subprocess.Popen([python, "-u", str(script), mode], stdout=out, stderr=subprocess.STDOUT, cwd=log.parent,
                                 preexec_fn=(lambda: os.setuid(user)) if user is not None else None)  # noqa: PLW1509 - no threads yet
        self.procs.append(p)
        end = time.monotonic() + 20
        while wait_for and wait_for not in log.read_text() and p.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        return p

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def kids():
    c = Children()
    yield c
    c.stop()


def test_busy_process_with_a_fresh_log_is_running(tmp_path, kids):
    log = tmp_path / "train.log"
    p = kids.start("ok", log)
    ins = process.inspect(p.pid, **FAST)
    assert ins.state == "running" and ins.cpu_percent() > process.IDLE_CPU  # a shared, loaded machine gives it little
    assert str(log) in ins.logs and ins.log_idle(time.time()) < 5
    assert "train.py ok" in ins.cmdline and ins.threads >= 1 and ins.user == "root"
    d = analyse(DiagnoseRequest(pid=p.pid), Evidence(target=f"pid {p.pid}", target_kind="pid", collected_at=_now(),
                                                      sources=[process.evidence(ins, 300)]))
    assert d.run_status is RunStatus.RUNNING and d.primary_cause is None
    assert "nothing has failed yet" in d.insufficient_evidence
    assert "per interval" in process.evidence(ins, 300).facts["cpu"]


def test_sleeping_process_is_sleeping_not_hung(tmp_path, kids):
    p = kids.start("sleep", tmp_path / "train.log", wait_for="starting")
    ins = process.inspect(p.pid, **FAST)
    assert ins.state == "sleeping" and ins.cpu_percent() < process.IDLE_CPU
    assert process.signals(ins, 300) == []


def test_stalled_process_makes_the_run_hung(tmp_path, kids, monkeypatch):
    log = tmp_path / "train.log"
    p = kids.start("stall", log, wait_for="step 20 ")
    time.sleep(1.2)
    monkeypatch.setenv("ML_SKILLS_STALL_AFTER", "0.5")
    monkeypatch.setenv("ML_SKILLS_PROC_SAMPLE", "0.6")
    d = diagnose(DiagnoseRequest(pid=p.pid))
    assert d.run_status is RunStatus.HUNG and d.primary_cause.value == "stalled"
    assert "alive but idle" in d.root_cause.root and "train.log not written for" in d.root_cause.root
    assert d.root_cause.proximate_line.line_no == len(log.read_text().splitlines())  # pinned to the log's last line
    assert d.last_progress.step == 20


def test_spinning_process_with_a_silent_log_is_hung(tmp_path, kids):
    p = kids.start("spin", tmp_path / "train.log", wait_for="step 20 ")
    time.sleep(1.0)
    ins = process.inspect(p.pid, stall_after=0.5, **FAST)
    assert ins.state == "hung" and ins.cpu_percent() > process.IDLE_CPU
    [a] = process.signals(ins, 0.5)
    assert a.failure_class.value == "stalled" and "spinning without progress" in a.detail


def test_stopped_process(tmp_path, kids):
    p = kids.start("sleep", tmp_path / "train.log", wait_for="starting")
    os.kill(p.pid, signal.SIGSTOP)
    _until(p.pid, psutil.STATUS_STOPPED)
    ins = process.inspect(p.pid, **FAST)
    os.kill(p.pid, signal.SIGCONT)
    assert ins.state == "stopped"
    assert f"kill -CONT {p.pid}" in process.signals(ins, 300)[0].detail


def _until(pid: int, status: str) -> None:
    end = time.monotonic() + 20
    while psutil.Process(pid).status() != status and time.monotonic() < end:
        time.sleep(0.05)


def _until_zombie(pid: int) -> None:
    _until(pid, psutil.STATUS_ZOMBIE)


def test_zombie_gives_its_exit_code_and_a_crashed_run(tmp_path, kids, monkeypatch):
    p = kids.start("diverge", tmp_path / "train.log", wait_for=None)
    _until_zombie(p.pid)  # not reaped: we are its parent and do not wait yet
    monkeypatch.setenv("ML_SKILLS_PROC_SAMPLE", "0.3")
    d = diagnose(DiagnoseRequest(pid=p.pid))
    assert d.run_status is RunStatus.CRASHED and d.primary_cause.value == "process-crash"
    assert any("exited with code 1" in e.text for e in d.evidence)
    assert any("pass the log path" in e.text for e in d.evidence)  # says what would tell why


def test_zombie_killed_by_sigkill_points_at_the_oom_killer(tmp_path, kids):
    p = kids.start("sleep", tmp_path / "train.log", wait_for="starting")
    os.kill(p.pid, signal.SIGKILL)
    _until_zombie(p.pid)
    ins = process.inspect(p.pid, **FAST)
    assert (ins.state, ins.exit_code, ins.exit_signal) == ("zombie", None, signal.SIGKILL)
    assert "killed by SIGKILL" in process.signals(ins, 300)[0].detail and "OOM killer" in process.signals(ins, 300)[0].detail


def test_process_that_exits_during_inspection_still_gets_its_log_diagnosed(tmp_path, kids, monkeypatch):
    log = tmp_path / "train.log"
    p = kids.start("diverge", log, wait_for="step 2 ")
    threading.Thread(target=p.wait, daemon=True).start()  # its parent reaps it at once: it is gone, not a zombie
    monkeypatch.setenv("ML_SKILLS_PROC_SAMPLE", "3")
    d = diagnose(DiagnoseRequest(pid=p.pid))
    assert p.returncode == 1
    assert any("exited during the 3 s sample" in e.text for e in d.evidence)
    assert d.primary_cause.value in ("nan-inf", "optimization-divergence")  # the loss blew up to inf: from its log
    assert d.run_status in (RunStatus.DIVERGED, RunStatus.CRASHED)
    assert any(s.startswith(str(log)) for s in d.sources) and f"process:{p.pid} (partial)" in d.sources


def test_gone_pid_is_a_clear_error(kids, tmp_path):
    p = kids.start("sleep", tmp_path / "train.log", wait_for=None)
    p.kill()
    p.wait()
    with pytest.raises(TargetNotFound, match=f"no process with pid {p.pid}: it has ended"):
        process.inspect(p.pid)


@pytest.fixture
def shared_dir():
    d = tempfile.mkdtemp(prefix="ml-skills-proc-")  # not under pytest's 0700 tmp: another user must reach it
    os.chmod(d, 0o777)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def test_another_users_process_inspected_by_root(shared_dir, kids):
    log = shared_dir / "train.log"
    p = kids.start("stall", log, python="/usr/bin/python3", user=NOBODY, wait_for="step 20 ")
    ins = process.inspect(p.pid, **FAST)
    assert ins.user == "nobody" and str(log) in ins.logs


def test_another_users_process_seen_without_privilege_is_partial(tmp_path, kids):
    p = kids.start("stall", tmp_path / "train.log", wait_for="step 20 ")
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # the inspector as 'nobody', against root's training process
        try:
            os.close(r)
            os.setuid(NOBODY)
            ev = process.evidence(process.inspect(p.pid, **FAST), 300)
            os.write(w, ev.model_dump_json().encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(child, 0)
    ev = json.loads(data)
    assert ev["status"] == "partial" and ev["state"] in ("sleeping", "stalled")
    assert [m for m in ev["missing"] if "open" in m] == [
        f"open files of pid {p.pid}: access denied (it belongs to another user): rerun as that user or root, or pass its log path"]
    assert ev["facts"]["user"] == "root" and "train.py stall" in ev["facts"]["command"]


def test_name_lookup_picks_the_training_process(tmp_path, kids):
    name = f"train_{os.getpid()}_pick.py"
    p = kids.start("ok", tmp_path / "train.log", name=name)
    bystander = subprocess.Popen(["sleep", "30", name])  # mentions the name but is not training
    kids.procs.append(bystander)
    assert process.find(name) == p.pid


def test_name_lookup_with_two_equal_candidates_asks_which(tmp_path, kids):
    name = f"train_{os.getpid()}_twin.py"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = kids.start("sleep", tmp_path / "a" / "train.log", name=name, wait_for="starting")
    b = kids.start("sleep", tmp_path / "b" / "train.log", name=name, wait_for="starting")
    with pytest.raises(InputError, match=f"2 processes match '{name}'.*pass --pid") as e:
        process.find(name)
    assert f"pid {a.pid}" in str(e.value) and f"pid {b.pid}" in str(e.value)


def test_name_lookup_with_no_match():
    with pytest.raises(TargetNotFound, match="no process matches 'no_such_training_script_x.py'"):
        process.find("no_such_training_script_x.py")


def test_gpu_absent_is_said_not_failed(tmp_path, kids):
    p = kids.start("sleep", tmp_path / "train.log", wait_for="starting")
    ins = process.inspect(p.pid, **FAST)
    if shutil.which("nvidia-smi") is None:
        assert ins.gpu.startswith("nvidia-smi not found: GPU use unknown")
    else:
        assert ins.gpu


def test_environment_never_leaves(tmp_path, kids, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef0123456789abcdef01234567")
    p = kids.start("sleep", tmp_path / "train.log", wait_for="starting")
    ev = process.evidence(process.inspect(p.pid, **FAST), 300)
    assert "0123456789abcdef" not in ev.model_dump_json()
    record("secret instances planted", "a live process's environment (never read)", 1)


def test_secrets_on_the_command_line_are_redacted(tmp_path, kids):
    token, key = "hf_" + "Ab1" * 12, "9d077416683d573590561d153f2c8df1a5314741"
    with open(tmp_path / "train.log", "wb") as out:
        p = subprocess.Popen([sys.executable, "-u", str(TRAIN), "sleep", "20", "--hf-token", token, "--wandb-api-key", key], stdout=out)
    kids.procs.append(p)
    ev = process.evidence(process.inspect(p.pid, **FAST), 300)
    dumped = ev.model_dump_json()
    assert token not in dumped and key not in dumped and "--hf-token [REDACTED]" in ev.facts["command"]
    record("secret instances planted", "a live process's command line", 2)


def test_cli_end_to_end_on_a_stalled_pid(tmp_path, kids):
    log = tmp_path / "train.log"
    p = kids.start("stall", log, wait_for="step 20 ")
    time.sleep(1.2)
    env = {**os.environ, "ML_SKILLS_STALL_AFTER": "1", "ML_SKILLS_PROC_SAMPLE": "0.6"}
    out = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--pid", str(p.pid), "--out-dir", str(tmp_path / "o")],
                         check=False, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"Target: pid {p.pid} (pid)" in out.stdout and f"Process: pid {p.pid} python" in out.stdout
    assert "Status: hung" in out.stdout and "Primary cause: stalled" in out.stdout
    report = json.loads((tmp_path / "o" / "check-failed-run.json").read_text())
    assert report["run_status"] == "hung" and report["primary_cause"] == "stalled"


def test_cli_one_line_error_for_a_pid_that_is_gone(tmp_path, kids):
    p = kids.start("sleep", tmp_path / "train.log", wait_for=None)
    p.kill()
    p.wait()
    out = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--pid", str(p.pid), "--out-dir", str(tmp_path)],
                         check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and f"no process with pid {p.pid}" in out.stderr


def _now():
    from datetime import UTC, datetime

    return datetime.now(UTC)


def test_cli_end_to_end_by_name(tmp_path, kids):
    name = f"train_{os.getpid()}_cli.py"
    p = kids.start("ok", tmp_path / "train.log", name=name)
    env = {**os.environ, "ML_SKILLS_PROC_SAMPLE": "0.6"}
    out = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--proc", name, "--out-dir", str(tmp_path / "o")],
                         check=False, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    exe = Path(sys.executable).name  # the child runs under the interpreter the tests run under: python or python3
    assert f"Target: process '{name}' (proc)" in out.stdout and f"Process: pid {p.pid} {exe}, running" in out.stdout
    assert "Status: running" in out.stdout


def test_name_lookup_prefers_the_exact_script_name_over_a_longer_one(tmp_path, kids):
    name = f"train_{os.getpid()}_exact.py"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    exact = kids.start("sleep", tmp_path / "a" / "train.log", name=name, wait_for="starting")
    kids.start("ok", tmp_path / "b" / "train.log", name=f"slow_{name}")  # busier, but only contains the name
    assert process.find(name) == exact.pid


def _fake_nvidia_smi(bin_dir: Path, body: str) -> str:
    """nvidia-smi's CSV answer, at the wire: no NVIDIA driver can be reached on this machine."""
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


def test_gpu_memory_per_process_from_nvidia_smi(tmp_path, kids, monkeypatch):
    p = kids.start("sleep", tmp_path / "train.log", wait_for="starting")
    monkeypatch.setenv("PATH", _fake_nvidia_smi(tmp_path / "bin", f'echo "{p.pid}, 2048"\necho "1, 512"\n'))
    assert process.inspect(p.pid, **FAST).gpu == f"pid {p.pid}: 2048 MiB"


def test_nvidia_smi_without_a_driver_is_said_not_failed(tmp_path, kids, monkeypatch):
    p = kids.start("sleep", tmp_path / "train.log", wait_for="starting")
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    monkeypatch.setenv("PATH", _fake_nvidia_smi(tmp_path / "bin", f'echo "{msg}"\nexit 9\n'))
    ins = process.inspect(p.pid, **FAST)
    assert ins.gpu == f"nvidia-smi failed (exit 9: {msg}): GPU use unknown" and ins.state == "sleeping"


def test_a_launchers_worker_log_and_stall_are_found_through_its_children(tmp_path, kids):
    log = tmp_path / "worker.log"
    launcher = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -u "{TRAIN}" stall > "{log}" 2>&1; exit 1'])
    kids.procs.append(launcher)
    end = time.monotonic() + 20
    while not (log.exists() and "step 20 " in log.read_text()) and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(1.0)
    ins = process.inspect(launcher.pid, stall_after=0.5, **FAST)
    assert str(log) in ins.logs and len(ins.children) == 1 and ins.state == "stalled"
    for c in psutil.Process(launcher.pid).children():
        c.kill()
