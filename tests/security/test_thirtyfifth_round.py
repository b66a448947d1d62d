"""Issue 14's thirty-fifth round: an outside tester's attacks (a helper session that did not write this code). Each test
drives the server over stdio with real checkpoints written by PyTorch and safetensors; each failed on the code before its
fix (docs/security.md, "Thirty-fifth round"): a resume pointer whose relative content the run reads from its working
folder (where command.txt is) was judged only from the pointer's own folder, so a valid target read as missing and was
moved off with no one asked, and the new content was written relative to a folder the run's reader never uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.conftest import Server, call_once

pytestmark = pytest.mark.slow  # real child processes


def _repoint(srv: Server, pointer: Path, ckpt: Path) -> str:
    """The repoint asked for by a client that cannot ask the person: it runs only if the policy calls it safe."""
    _err, body, _ = call_once(srv, "request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": str(pointer),
                                                              "checkpoint": str(ckpt)}})
    return body


def test_a_pointer_valid_from_the_runs_working_folder_is_never_moved_unasked(tmp_path: Path) -> None:
    """Promise 2: 'ckpts/latest' holding 'ckpts/ckpt-200.pt', the run's path from its working folder, a valid PyTorch
    checkpoint; a client that cannot ask moved it to ckpt-100.pt as a safe action."""
    torch = pytest.importorskip("torch")
    run = tmp_path / "run"
    (run / "ckpts").mkdir(parents=True)
    for s in (100, 200):
        torch.save({"w": torch.zeros(4) + s}, run / "ckpts" / f"ckpt-{s}.pt")
    (run / "command.txt").write_text("python train.py --output_dir ckpts\n")
    pointer = run / "ckpts" / "latest"
    pointer.write_text("ckpts/ckpt-200.pt\n")
    body = _repoint(Server(tmp_path, roots=[tmp_path]), pointer, run / "ckpts" / "ckpt-100.pt")
    assert pointer.read_text() == "ckpts/ckpt-200.pt\n", body
    assert "no-elicitation" in body, body


def test_a_repoint_off_a_missing_target_keeps_the_folder_the_run_reads_from(tmp_path: Path) -> None:
    """Promise 2: the root-relative layout ('outputs/exp1/latest' holding 'outputs/exp1/step-200.safetensors', read from
    the project root): once moved (the old target gone, so no rollback and no question), the pointer held
    'step-100.safetensors', relative to its own folder, which the run's reader cannot find."""
    st = pytest.importorskip("safetensors.torch")
    torch = pytest.importorskip("torch")
    exp = tmp_path / "outputs" / "exp1"
    exp.mkdir(parents=True)
    st.save_file({"w": torch.ones(2)}, str(exp / "step-100.safetensors"))
    st.save_file({"w": torch.ones(2) * 2}, str(exp / "step-200.safetensors"))
    (tmp_path / "command.txt").write_text("python train.py --out outputs/exp1\n")
    pointer = exp / "latest"
    pointer.write_text("outputs/exp1/step-200.safetensors\n")
    srv = Server(tmp_path, roots=[tmp_path])
    body = _repoint(srv, pointer, exp / "step-100.safetensors")
    assert pointer.read_text() == "outputs/exp1/step-200.safetensors\n" and "no-elicitation" in body, body
    (exp / "step-200.safetensors").unlink()  # now the old target is gone: moving off it is no rollback
    body = _repoint(srv, pointer, exp / "step-100.safetensors")
    assert pointer.read_text() == "outputs/exp1/step-100.safetensors\n", body
    assert (tmp_path / pointer.read_text().strip()).is_file()


def test_a_pointer_beside_its_checkpoint_is_read_and_written_as_before(tmp_path: Path) -> None:
    """The everyday layout stays as it was: 'latest' holding a name beside it, its target gone, is moved unasked and
    written as a name beside it."""
    st = pytest.importorskip("safetensors.torch")
    torch = pytest.importorskip("torch")
    run = tmp_path / "run"
    run.mkdir()
    st.save_file({"w": torch.ones(2)}, str(run / "model-100.safetensors"))
    pointer = run / "latest"
    pointer.write_text("model-200.safetensors\n")
    body = _repoint(Server(tmp_path, roots=[tmp_path]), pointer, run / "model-100.safetensors")
    assert pointer.read_text() == "model-100.safetensors\n", body


_CUT_WRITE = """
import resource, signal, sys
from ml_skills.policy.audit import AuditEntry, AuditError, AuditLog
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write over the limit returns short instead of killing the process
log = AuditLog(sys.argv[1])
log.append(AuditEntry(action="first", outcome="ran"))
size = len(open(sys.argv[1], "rb").read())
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, size + 40))
try:
    log.append(AuditEntry(action="second", outcome="starting", detail="x" * 400))
except AuditError as e:
    print("refused:", e)
"""


def test_an_audit_entry_after_a_cut_write_starts_on_its_own_line(tmp_path: Path) -> None:
    """A side observation of the round: a write-ahead entry cut short by a file size limit (refused, nothing ran) left
    half a line, the next entry was glued onto it, and reading the log back raised on the joined line."""
    import subprocess
    import sys

    from ml_skills.policy.audit import AuditEntry, AuditLog

    path = tmp_path / "audit.jsonl"
    got = subprocess.run([sys.executable, "-c", _CUT_WRITE, str(path)], check=False, capture_output=True, text=True, timeout=120)
    assert "refused:" in got.stdout and "short write" in got.stdout, got.stdout + got.stderr
    assert not path.read_bytes().endswith(b"\n")  # the cut entry is there, half written
    log = AuditLog(path)
    log.append(AuditEntry(action="third", outcome="ran"))
    entries = log.entries()
    assert [e.get("action") for e in entries] == ["first", None, "third"], entries
    assert entries[1]["unparsed"].startswith('{"when"')


def test_a_planted_folder_never_makes_new_content_name_another_file_from_the_runs_folder(tmp_path: Path) -> None:
    """Thirty-sixth round, promise 2: with the old target gone, an empty 'ckpts/ckpts/' planted beside the pointer made
    the pointer's folder the base, so 'ckpt-100.pt' was written, which from the run's folder names a planted pickle,
    not the checkpoint checked. Content that names anything else from any base is written as the full path."""
    import pickle

    torch = pytest.importorskip("torch")
    run = tmp_path / "run"
    (run / "ckpts" / "ckpts").mkdir(parents=True)
    (run / "command.txt").write_text("python train.py\n")
    torch.save({"w": torch.zeros(4)}, run / "ckpts" / "ckpt-100.pt")
    (run / "ckpt-100.pt").write_bytes(pickle.dumps({"planted": True}))
    pointer = run / "ckpts" / "latest"
    pointer.write_text("ckpts/ckpt-200.pt\n")  # its target is gone
    body = _repoint(Server(tmp_path, roots=[tmp_path]), pointer, run / "ckpts" / "ckpt-100.pt")
    assert pointer.read_text() == f"{run / 'ckpts' / 'ckpt-100.pt'}\n", body


def test_the_audit_log_names_the_pointer_a_repoint_rewrote(tmp_path: Path) -> None:
    """A side observation of the thirty-fifth and thirty-sixth rounds: a pointer at '/tmp/.../R/run/ckpts/latest' read, on
    its own, as a PEM key's body line, and the audit entry said `"target": "[REDACTED]"`: the log hid which file was
    rewritten. Path fields are redacted as they stand in a line, as tool results are; a secret in them is still masked."""
    import json
    import secrets
    import shutil

    st = pytest.importorskip("safetensors.torch")
    torch = pytest.importorskip("torch")
    root = Path(f"/tmp/R{secrets.token_hex(4)}")  # a short path of letters, digits and '/': the shape the rule reads as a key
    try:
        run = root / "run" / "ckpts"
        run.mkdir(parents=True)
        st.save_file({"w": torch.ones(2)}, str(run / "model-100.safetensors"))
        pointer = run / "latest"
        pointer.write_text("model-200.safetensors\n")  # gone: a safe move
        srv = Server(tmp_path, roots=[root])
        _repoint(srv, pointer, run / "model-100.safetensors")
        assert pointer.read_text() == "model-100.safetensors\n"
        audit = [json.loads(x) for x in srv.audit.read_text().splitlines()]
        assert str(pointer) in {e.get("target") for e in audit}, audit
    finally:
        shutil.rmtree(root, ignore_errors=True)
