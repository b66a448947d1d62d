"""Issue 14's thirty-third round: an outside tester's attacks (a helper session that did not write this code). Each test
drives the server over stdio or the CLI in a child process; each failed on the code before its fix (docs/security.md,
"Thirty-third round"). The older MLflow store is made by MLflow's own schema and alembic migrations, stopped at the
revision before 3.0's tables."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import Server, call_once
from tests.security.childcli import cli

pytestmark = pytest.mark.slow  # real child processes

_OLD_STORE = """
import sys, sqlalchemy
from alembic import command
from mlflow.store.db.utils import _get_alembic_config
from mlflow.store.tracking.dbmodels.initial_models import Base as InitialBase
url = f"sqlite:///{sys.argv[1]}"
eng = sqlalchemy.create_engine(url)
InitialBase.metadata.create_all(eng)
cfg = _get_alembic_config(url)
with eng.begin() as conn:
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "0584bdc529eb")
"""


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _old_store(path: Path) -> Path:
    pytest.importorskip("mlflow")
    subprocess.run([sys.executable, "-c", _OLD_STORE, str(path)], check=True, capture_output=True, timeout=300)
    return path


def _with_env(**env: str):
    saved = dict(os.environ)
    os.environ.update(env)
    return saved


def test_get_mlflow_run_never_migrates_an_older_store(tmp_path: Path) -> None:
    """Promise 1: the store check only asked for MLflow's tables, so a store of an older MLflow passed, and the client
    migrated it in place (46 tables added) when get_mlflow_run opened it."""
    store = _old_store(tmp_path / "old.db")
    before = _sha(store)
    saved = _with_env(MLFLOW_TRACKING_URI=f"sqlite:///{store}")
    try:
        err, body, _ = call_once(Server(tmp_path, roots=[tmp_path]), "get_mlflow_run", {"run_id": "0123456789abcdef0123456789abcdef"})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert _sha(store) == before, body
    assert err and "failed unexpectedly" not in body and "cannot be read without writing" in body, body


def test_cli_triage_never_creates_or_migrates_an_mlflow_store(tmp_path: Path) -> None:
    """Promise 1: `triage-runs --mlflow-experiment` opened the store with MLflow's client directly: a missing sqlite
    file was created (65 tables), an older store migrated, a missing file store made (.trash, 0/meta.yaml)."""
    old = _old_store(tmp_path / "old.db")
    before = _sha(old)
    for uri, env in ((f"sqlite:///{tmp_path / 'created.db'}", {}), (f"sqlite:///{old}", {}),
                     (str(tmp_path / "newstore"), {"MLFLOW_ALLOW_FILE_STORE": "true"})):
        got = cli("triage-runs", "--mlflow-experiment", "0", "--out-dir", str(tmp_path / "out"), cwd=tmp_path, timeout=180,
                  env={"MLFLOW_TRACKING_URI": uri, **env})
        assert "internal error" not in got.stderr and "Traceback" not in got.stderr, got.stderr[-600:]
    assert not (tmp_path / "created.db").exists() and not (tmp_path / "newstore").exists()
    assert _sha(old) == before


def _run_with_manifest(root: Path, previous: str) -> Path:
    run = root / "run-7"
    run.mkdir(parents=True, exist_ok=True)
    (run / "model.safetensors").write_bytes(b"x")
    (run / "manifest.json").write_text(json.dumps({"run_id": "run-7", "git_commit": "abc", "previous_version": previous}))
    return run


def test_a_manifests_previous_version_outside_the_roots_is_never_read(tmp_path: Path) -> None:
    """Promise 5: the CLI made the manifest's previous_version one of its roots and read the folder it named (a file name
    and its header's verdict printed); the server looked at it before confining it, so its answer told whether a path
    outside the roots exists."""
    root, outside = tmp_path / "root", tmp_path / "outside" / "private-models"
    outside.mkdir(parents=True)
    (outside / "payroll-2026-ceo.safetensors").write_bytes(b"\x10" + b"\x00" * 7 + b'{"SECRET_T":{}}')
    run = _run_with_manifest(root, str(outside))
    got = cli("verify-artifacts", str(run), "--out-dir", str(tmp_path / "cliout"), cwd=tmp_path, timeout=120)
    assert "payroll-2026-ceo" not in got.stdout + got.stderr, got.stdout[-800:]
    assert "outside the allowed roots" in got.stdout + got.stderr, got.stdout[-800:]
    answers = []
    for prev in (str(outside), str(tmp_path / "outside" / "no-such-dir")):
        _run_with_manifest(root, prev)
        _err, _body, found = call_once(Server(root, roots=[root]), "verify_artifacts", {"path": str(run)})
        roll = next(c for c in found["report"]["checks"] if c["name"] == "rollback")
        answers.append(roll["detail"].replace(found["marker"], "M").replace(prev, "P"))
    assert answers[0] == answers[1] and "outside the allowed roots" in answers[0], answers
