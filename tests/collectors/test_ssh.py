"""The ssh collector against a real sshd on 127.0.0.1: real keys, real known_hosts, real files."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ml_skills.collectors import ssh
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose, read_raw
from ml_skills.errors import InputError, SourceTimeout, SourceUnavailable, TargetNotFound

from tests.security.figures import record

from ..conftest import ROOT, run_cli
from . import sshd as sshd_server

NAN_LOG = ROOT / "examples" / "nan-loss" / "train.log"
USER = pwd.getpwuid(os.getuid()).pw_name  # sshd runs as us, so it logs us in (root in CI)
FETCH_SCRIPT = ROOT / "skills" / "check-failed-run" / "scripts" / "fetch-remote-log.sh"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = sshd_server.start(tmp_path_factory.mktemp("sshd"))
    yield s
    s.stop()


@pytest.fixture
def cfg(server, monkeypatch):
    path = server.client_config("ok")
    monkeypatch.setenv("ML_SKILLS_SSH_CONFIG", path)
    return path


def _real_crash_stderr(run_dir: Path) -> None:
    """A real Python failure's stderr, as a job scheduler would leave it next to the log."""
    with open(run_dir / "stderr.txt", "wb") as err:
        subprocess.run([sys.executable, "-c", "import json; json.load(open('dataset_config.json'))"], cwd=run_dir, stderr=err, check=False)


def _run_dir(tmp_path: Path, *, stderr: bool = False) -> Path:
    """A run directory holding the real NaN log (and the real crash's stderr)."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(NAN_LOG, run / "train.log")
    if stderr:
        _real_crash_stderr(run)
    return run


def _key(d):
    return (d.primary_cause, d.run_status, d.decision, [f.fix_id for f in d.fixes], d.root_cause.root,
            d.root_cause.proximate_line.line_no if d.root_cause.proximate_line else None)


def test_remote_diagnosis_equals_the_local_one(tmp_path, cfg):
    run = _run_dir(tmp_path)
    local = diagnose(DiagnoseRequest(target=str(run / "train.log")))
    remote = diagnose(DiagnoseRequest(target=f"{USER}@127.0.0.1:{run / 'train.log'}"))
    assert remote.target_kind == "ssh"
    assert _key(remote) == _key(local)
    assert local.primary_cause.value == "nan-inf"
    assert remote.sources[0].startswith(f"{USER}@127.0.0.1:{run / 'train.log'} (ok")


def test_cli_prints_the_report_for_a_remote_log(tmp_path, cfg):
    proc = run_cli("check-failed-run", f"{USER}@127.0.0.1:{NAN_LOG}", "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert f"Target: {USER}@127.0.0.1:{NAN_LOG} (ssh)" in proc.stdout
    assert "Primary cause: nan-inf" in proc.stdout


def test_companion_files_come_along_bounded_and_stderr_is_scanned(tmp_path, cfg):
    run = _run_dir(tmp_path, stderr=True)
    (run / "train_args.json").write_text('{"lr": 0.15, "epochs": 3}')
    (run / "deepspeed_config.json").write_text('{"zero_optimization": {"stage": 2}, "x": "' + "a" * 100_000 + '"}')
    (run / "model.safetensors").write_bytes(b"\0" * 1000)
    remote, got, problems = ssh.fetch(f"{USER}@127.0.0.1:{run / 'train.log'}", config=cfg)
    assert problems == [] and got.complete
    assert got.log == NAN_LOG.read_text()
    assert got.size == NAN_LOG.stat().st_size
    assert set(got.companions) == {"stderr.txt", "train_args.json", "deepspeed_config.json"}
    assert got.companions["train_args.json"] == '{"lr": 0.15, "epochs": 3}'
    assert len(got.companions["deepspeed_config.json"]) == ssh.COMPANION_BYTES  # its head, capped
    assert "FileNotFoundError" in got.companions["stderr.txt"]
    raw = ssh.collect(DiagnoseRequest(target=str(remote)))
    source, logs = raw.source, raw.logs
    assert [log.source.rsplit("/", 1)[-1] for log in logs] == ["train.log", "stderr.txt"]
    assert logs[0].text == NAN_LOG.read_text() and logs[0].path is None  # the fetched text, unread: the engine scans it
    scanned = read_raw(raw, DiagnoseRequest(target=str(remote)))
    assert scanned[1].tracebacks and scanned[1].tracebacks[0].exc_type == "FileNotFoundError"
    assert "stderr.txt" in source.facts["companion files"] and "deepspeed_config.json" in source.details["configs"]


def test_only_the_tail_is_fetched(tmp_path, cfg):
    big = tmp_path / "train.log"
    with open(big, "wb") as f:
        f.writelines([NAN_LOG.read_bytes()] * 4000)  # the real log repeated to ~4 MB: a long run's log in size
    _, got, _ = ssh.fetch(f"{USER}@127.0.0.1:{big}", config=cfg, lines=50)
    assert got.log is not None and got.log.splitlines() == big.read_text().splitlines()[-50:]
    assert got.size == big.stat().st_size


@pytest.mark.parametrize("path", [
    "/tmp/x; touch {marker}", "/tmp/$(touch {marker})", "/tmp/`touch {marker}`", "/tmp/x' ; touch {marker} ; '",
    '/tmp/x" ; touch {marker} ; "',
])
def test_an_injected_command_never_runs(tmp_path, cfg, path):
    marker = tmp_path / "INJECTED"
    with pytest.raises(TargetNotFound, match="no such file"):
        ssh.fetch(f"{USER}@127.0.0.1:{path.format(marker=marker)}", config=cfg)
    assert not marker.exists()
    record("hostile inputs", "ssh remote paths with shell injection (marker file never written)", 1)


def test_a_file_with_shell_characters_in_its_name_is_fetched(tmp_path, cfg):
    odd = tmp_path / "run $(id) 'a' \"b\"; c"
    odd.mkdir()
    shutil.copy(NAN_LOG, odd / "train.log")
    _, got, _ = ssh.fetch(f"{USER}@127.0.0.1:{odd / 'train.log'}", config=cfg)
    assert got.log == NAN_LOG.read_text()


@pytest.mark.parametrize("target, message", [
    ("root@-oProxyCommand=touch_x:/tmp/a.log", "starting with '-'"),
    ("-oProxyCommand=x@host:/tmp/a.log", "starting with '-'"),
    ("root@host:relative/train.log", "absolute path"),
    ("root@host:/tmp/a\nb.log", "control characters"),
    ("ro ot@host:/tmp/a.log", "invalid remote user"),
    ("root@ho st:/tmp/a.log", "invalid remote host"),
    ("no-at-sign:/tmp/a.log", "expected user@host"),
])
def test_bad_targets_are_refused_before_ssh_runs(target, message):
    with pytest.raises(InputError, match=message):
        ssh.parse_target(target)
    record("hostile inputs", "ssh destinations: option injection, bad user/host/path", 1)


def test_connection_refused(server):
    closed = sshd_server.free_port()
    cfg = server.client_config("closed", port=closed)
    with pytest.raises(SourceUnavailable, match="connection refused: check that sshd runs there"):
        ssh.fetch(f"{USER}@127.0.0.1:{NAN_LOG}", config=cfg, deadline=10)


def test_unknown_host_key_is_never_accepted(server):
    cfg = server.client_config("unknown", known_hosts="empty_known_hosts")
    with pytest.raises(SourceUnavailable, match="not in known_hosts and unknown keys are never accepted"):
        ssh.fetch(f"{USER}@127.0.0.1:{NAN_LOG}", config=cfg, deadline=10)
    assert (server.root / "empty_known_hosts").read_text() == ""


def test_wrong_key_is_permission_denied_without_a_prompt(server):
    cfg = server.client_config("wrongkey", key="otherkey")
    with pytest.raises(SourceUnavailable, match=r"permission denied \(publickey\).*no password is ever prompted"):
        ssh.fetch(f"{USER}@127.0.0.1:{NAN_LOG}", config=cfg, deadline=10)


def test_missing_file_is_not_found(tmp_path, cfg):
    with pytest.raises(TargetNotFound, match=f"{USER}@127.0.0.1:{tmp_path}/nope.log: no such file on 127.0.0.1"):
        ssh.fetch(f"{USER}@127.0.0.1:{tmp_path}/nope.log", config=cfg)


def test_missing_log_still_returns_the_companions_as_partial_evidence(tmp_path, cfg):
    _real_crash_stderr(tmp_path)
    d = diagnose(DiagnoseRequest(target=f"{USER}@127.0.0.1:{tmp_path}/train.log"))
    assert d.primary_cause is not None  # from the real FileNotFoundError in stderr.txt
    assert any("missing:" in e.text and "no such file" in e.text for e in d.evidence)
    assert "(partial)" in d.sources[-1]


def test_a_hang_is_killed_at_the_deadline(server):
    cfg = server.client_config("sleepy", port=server.sleep_port)
    start = time.monotonic()
    with pytest.raises(SourceTimeout, match="no answer within the 2 s deadline"):
        ssh.fetch(f"{USER}@127.0.0.1:{NAN_LOG}", config=cfg, deadline=2)
    assert time.monotonic() - start < 4


def test_cli_gives_one_line_for_a_hang(server, tmp_path):
    env = {**os.environ, "ML_SKILLS_SSH_CONFIG": server.client_config("sleepy2", port=server.sleep_port), "ML_SKILLS_SSH_DEADLINE": "2"}
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", f"{USER}@127.0.0.1:{NAN_LOG}", "--out-dir", str(tmp_path)],
                          check=False, capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ml-skills: error: ssh to 127.0.0.1: no answer within the 2 s deadline")


def test_fetch_script_writes_the_tail_and_companions(tmp_path, cfg):
    run = _run_dir(tmp_path, stderr=True)
    (run / "config.yaml").write_text("lr: 0.15\n")
    out = tmp_path / "fetched"
    proc = subprocess.run(["bash", str(FETCH_SCRIPT), "-o", str(out), f"{USER}@127.0.0.1:{run / 'train.log'}"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (out / "train.log").read_text() == NAN_LOG.read_text()
    assert (out / "config.yaml").read_text() == "lr: 0.15\n"
    assert "FileNotFoundError" in (out / "stderr.txt").read_text()
    assert str(out / "train.log") in proc.stdout


@pytest.mark.parametrize("target, message", [
    ("root@-oProxyCommand=x:/tmp/a.log", "starting with '-'"),
    ("root@host:relative.log", "absolute path"),
])
def test_fetch_script_refuses_bad_targets(tmp_path, target, message):
    proc = subprocess.run(["bash", str(FETCH_SCRIPT), "-o", str(tmp_path / "o"), target], check=False, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and message in proc.stderr


def test_fetch_script_reports_a_missing_file(tmp_path, cfg):
    proc = subprocess.run(["bash", str(FETCH_SCRIPT), "-o", str(tmp_path / "o"), f"{USER}@127.0.0.1:{tmp_path}/nope.log"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "no such file" in proc.stderr


def test_fetch_script_quotes_the_path_for_the_remote_shell(tmp_path, cfg):
    odd = tmp_path / "run $(touch {m}) 'a' \"b\"; touch {m}".replace("{m}", str(tmp_path / "INJECTED"))
    odd.mkdir(parents=True)  # the marker's slashes make nested directories: still one odd path
    shutil.copy(NAN_LOG, odd / "train.log")
    proc = subprocess.run(["bash", str(FETCH_SCRIPT), "-o", str(tmp_path / "o"), f"{USER}@127.0.0.1:{odd / 'train.log'}"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o" / "train.log").read_text() == NAN_LOG.read_text()
    assert not (tmp_path / "INJECTED").exists()
    record("hostile inputs", "ssh remote paths with shell injection (marker file never written)", 1)


def test_fetch_script_hang_is_killed_at_its_deadline(server, tmp_path):
    env = {**os.environ, "ML_SKILLS_SSH_CONFIG": server.client_config("sleepy3", port=server.sleep_port)}
    start = time.monotonic()
    proc = subprocess.run(["bash", str(FETCH_SCRIPT), "-t", "2", "-o", str(tmp_path / "o"), f"{USER}@127.0.0.1:{NAN_LOG}"],
                          check=False, capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode == 3 and "no answer within the 2 s deadline" in proc.stderr
    assert time.monotonic() - start < 5


def test_an_answer_cut_off_at_the_deadline_is_partial_evidence(server, tmp_path, monkeypatch):
    monkeypatch.setenv("ML_SKILLS_SSH_CONFIG", server.client_config("partial", port=server.partial_port))
    monkeypatch.setenv("ML_SKILLS_SSH_DEADLINE", "4")  # room for the handshake on a loaded machine
    remote, got, problems = ssh.fetch(f"{USER}@127.0.0.1:{NAN_LOG}", config=os.environ["ML_SKILLS_SSH_CONFIG"], deadline=4)
    assert got.log and NAN_LOG.read_text().startswith(got.log) and len(got.log) < NAN_LOG.stat().st_size
    assert problems == ["the fetch was cut off at the 4 s deadline: what arrived is partial"]
    d = diagnose(DiagnoseRequest(target=str(remote)))
    assert f"ssh:{remote} (partial)" in d.sources
    assert any("cut off at the 4 s deadline" in e.text for e in d.evidence)


def test_a_host_that_answers_with_a_banner_is_a_clear_error(server):
    cfg = server.client_config("junk", port=server.junk_port)
    with pytest.raises(SourceUnavailable, match="none of the fetched sections"):
        ssh.fetch(f"{USER}@127.0.0.1:{NAN_LOG}", config=cfg, deadline=10)


def test_cli_refuses_a_host_that_would_be_an_ssh_option(tmp_path):
    proc = run_cli("check-failed-run", "root@-oProxyCommand=touch_x:/tmp/a.log", "--out-dir", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "refusing remote target" in proc.stderr and "starting with '-'" in proc.stderr


def test_a_bad_deadline_setting_is_one_line(tmp_path):
    env = {**os.environ, "ML_SKILLS_SSH_DEADLINE": "soon"}
    proc = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", f"{USER}@127.0.0.1:{NAN_LOG}", "--out-dir", str(tmp_path)],
                          check=False, capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 2 and proc.stderr == "ml-skills: error: ML_SKILLS_SSH_DEADLINE='soon' is not a number of seconds\n"


def test_a_fifo_is_refused_on_the_host_without_blocking(tmp_path, cfg):
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)  # opening it would block forever: the remote script never opens what is not a regular file
    start = time.monotonic()
    with pytest.raises(SourceUnavailable, match="not a regular file"):
        ssh.fetch(f"{USER}@127.0.0.1:{fifo}", config=cfg, deadline=20)
    assert time.monotonic() - start < 10
