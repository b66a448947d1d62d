"""No channel carries a planted secret: CLI stdout/stderr, the JSON report, MCP results and errors, the audit log.

The log comes from really running tests/security/scenarios/leaky_train.py with fresh fake
secrets in its flags, environment, key files and the run directory's name; it really diverges.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from ml_skills.collectors import logfile

from tests.conftest import run_cli
from tests.mcp.conftest import Server, text
from tests.security.figures import record
from tests.security.leaky import LeakyRun, run_leaky


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> LeakyRun:
    run = run_leaky(tmp_path_factory.mktemp("leaky"))
    assert run.returncode == 1 and "FloatingPointError" in run.log.read_text()
    for s in (run.planted.values["hf"], run.planted.values["cli-password"], run.planted.sa_secrets[0]):
        assert s in run.log.read_text()  # the secrets really are in the log
    record("secret kinds planted", "leaky run (flags, env, key files, dir name)", run.kinds())
    record("secret instances planted", "leaky run (flags, env, key files, dir name)", run.instances())
    return run


def _clean(run: LeakyRun, *texts: str) -> None:
    for t in texts:
        assert run.planted.leaks(t) == [], t[:2000]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_cli_stdout_stderr_and_report_hold_no_secret(leaky: LeakyRun, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    proc = run_cli("check-failed-run", str(leaky.log), "--format", fmt, "--out-dir", str(out), "--last", "5000")
    assert proc.returncode == 0, proc.stderr
    report = (out / "check-failed-run.json").read_text()
    _clean(leaky, proc.stdout, proc.stderr, report)
    d = json.loads(report)
    assert d["primary_cause"] == "nan-inf"
    assert d["redactions"] > 0 and "[REDACTED]" in report
    record("channels checked, no secret found", f"CLI --format {fmt}: stdout, stderr, check-failed-run.json", 3)
    record("redactions reported", f"CLI --format {fmt} report", d["redactions"])


def test_cli_pasted_traceback_and_bad_paths_hold_no_secret(leaky: LeakyRun, tmp_path: Path) -> None:
    proc = run_cli("check-failed-run", "--traceback", "-", "--out-dir", str(tmp_path), stdin=leaky.log.read_bytes())
    _clean(leaky, proc.stdout, proc.stderr, (tmp_path / "check-failed-run.json").read_text())
    missing = leaky.run_dir / f"--token={leaky.planted.values['cli-token']}.log"  # an error message that names the path
    proc = run_cli("check-failed-run", str(missing), "--out-dir", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    _clean(leaky, proc.stdout, proc.stderr)
    record("channels checked, no secret found", "CLI pasted traceback (stdout, stderr, report) and an error naming a path", 5)


def test_a_secret_on_the_line_that_straddles_the_4_mib_chunk_boundary_is_caught(tmp_path: Path) -> None:
    """Chunks end at a newline, so the line is redacted whole; the run is padded so its last line
    (the error, with the token in it) starts before byte 4 MiB and ends after it."""
    probe = run_leaky(tmp_path / "a")
    data = probe.log.read_bytes()
    start = data.rindex(b"\nFloatingPointError") + 1
    length = len(data) - start
    run = run_leaky(tmp_path / "b", pad_bytes=logfile.CHUNK - start - length // 2)
    data = run.log.read_bytes()
    start = data.rindex(b"\nFloatingPointError") + 1
    assert start < logfile.CHUNK < len(data) and run.planted.values["hf"].encode() in data[start:]
    out = tmp_path / "out"
    proc = run_cli("check-failed-run", str(run.log), "--format", "json", "--out-dir", str(out))
    report = (out / "check-failed-run.json").read_text()
    _clean(run, proc.stdout, proc.stderr, report)
    assert "Loss became infinite or NaN at iteration" in report
    record("secret instances planted", "a line straddling the 4 MiB read boundary", 1)


def test_mcp_results_structured_content_errors_and_audit_hold_no_secret(leaky: LeakyRun, tmp_path: Path) -> None:
    srv = Server(tmp_path, roots=[leaky.run_dir.parent, tmp_path])
    v = leaky.planted.values
    log = str(leaky.log)
    calls = [
        ("read_log_tail", {"path": log, "lines": 5000}),
        ("read_log_window", {"path": log, "line": 5, "before": 5, "after": 100}),
        ("grep_log", {"path": log, "pattern": "(?i)token|key|password|auth|BEGIN", "context": 3}),
        ("scan_log", {"path": log}),
        ("list_artifacts", {"path": str(leaky.run_dir)}),
        ("inspect_checkpoint", {"path": str(leaky.run_dir / "key.pem")}),
        ("diagnose", {"target": log}),
        ("read_log_tail", {"path": str(leaky.run_dir / f"missing-{v['github']}.log")}),  # an error naming the path
        ("grep_log", {"path": log, "pattern": v["openai"] + "("}),  # an invalid pattern quoting a secret back
        ("classify_action", {"action": "kill-worker", "target": f"pid:1 --token {v['cli-token']}"}),
        ("request_action", {"action": {"kind": "kill-worker", "pid": 999999999, "signal": "TERM",
                                       "reason": f"Authorization: Bearer {v['bearer']}"}}),
        ("request_action", {"action": {"kind": "restart-unchanged", "command_file": str(leaky.run_dir / "command.txt")}}),
    ]

    async def go() -> list[tuple[str, str, str, bool]]:
        got = []
        async with srv.client() as c:
            for name, args in calls:
                r = await c.call_tool(name, args)
                got.append((name, text(r), json.dumps(r.structured_content or {}), bool(r.is_error)))
        return got

    results = anyio.run(go)
    for name, body, structured, _err in results:
        assert leaky.planted.leaks(body + structured) == [], (name, body[:1500])
    _, _, tail_structured, tail_err = results[0]
    assert not tail_err and json.loads(tail_structured)["redactions"] >= 10
    # the three bad calls, and the restart: leaky.py records argv without the interpreter, which is no launch command
    assert [n for n, _, _, err in results if err] == ["read_log_tail", "grep_log", "request_action", "request_action"]
    audit = srv.audit.read_text() if srv.audit.exists() else ""
    assert audit.count("\n") >= 1
    _clean(leaky, audit)
    report = (srv.out / "check-failed-run.json").read_text()
    _clean(leaky, report)
    record("channels checked, no secret found", "MCP tool results: text + structured content (incl. 3 errors)", 2 * len(results))
    record("channels checked, no secret found", "MCP audit log and diagnose's report", 2)
    record("redactions reported", "MCP read_log_tail of the leaky log", json.loads(tail_structured)["redactions"])
