"""Issue 14's thirty-fourth round: an outside tester's attacks (a helper session that did not write this code). Each test
drives the server over stdio or the CLI in a child process, on an MLflow sqlite store written by MLflow itself; each failed
on the code before its fix (docs/security.md, "Thirty-fourth round"): the read-only URI of the thirty-third round made
MLflow create 'file:/...' folders in the working folder (following a link planted there), and a store in WAL journal
mode gained '-wal' and '-shm' files."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import Server, call_once
from tests.security.childcli import cli

pytestmark = pytest.mark.slow  # real child processes

_STORE = """
import sys, mlflow
mlflow.set_tracking_uri(f"sqlite:///{sys.argv[1]}")
mlflow.set_experiment("e")
with mlflow.start_run() as r:
    for i in range(5):
        mlflow.log_metric("loss", 1.0 / (i + 1), step=i)
print(r.info.run_id)
"""


def _store(folder: Path, wal: bool) -> tuple[Path, str]:
    """A sqlite store with one finished run, written by MLflow (in WAL journal mode when `wal`), closed; its run id."""
    pytest.importorskip("mlflow")
    folder.mkdir(parents=True)
    db = folder / "mlflow.db"
    out = subprocess.run([sys.executable, "-c", _STORE, str(db)], check=True, capture_output=True, text=True, timeout=300,
                         cwd=folder)
    if wal:
        con = sqlite3.connect(db)
        assert con.execute("pragma journal_mode=wal").fetchone()[0] == "wal"
        con.close()
    return db, out.stdout.split()[-1]


def _tree(*roots: Path) -> set[str]:
    return {str(p) for r in roots for p in r.rglob("*")} | {str(p) for r in roots for p in r.rglob(".*")}


def test_get_mlflow_run_creates_nothing_in_its_working_folder_or_beside_the_store(tmp_path: Path) -> None:
    """Promise 1: get_mlflow_run made 'file:/<store's folders>' in the server's working folder (a run folder, an allowed
    root), and '-wal'/'-shm' beside a WAL store; through a link named 'file:' planted in the working folder it made
    folders outside the roots."""
    db, run_id = _store(tmp_path / "store", wal=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "file:").symlink_to(outside)
    before = _tree(tmp_path)
    saved = dict(os.environ)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{db}"
    try:
        err, body, _ = call_once(Server(tmp_path, roots=[tmp_path]), "get_mlflow_run", {"run_id": run_id})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert not err and "loss" in body, body[-600:]
    created = _tree(tmp_path) - before
    assert not [p for p in created if "audit" not in p and "/out" not in p], sorted(created)
    assert not list(outside.iterdir())


@pytest.mark.parametrize("wal", [True, False])
def test_the_cli_writes_only_into_its_out_dir_when_reading_an_mlflow_store(tmp_path: Path, wal: bool) -> None:
    """Promise 1: `check-failed-run --mlflow` and `triage-runs --mlflow-experiment` made 'file:/...' in the user's
    working folder, outside --out-dir, and '-wal'/'-shm' beside the store."""
    db, run_id = _store(tmp_path / "store", wal=wal)
    work = tmp_path / "work"
    work.mkdir()
    before = _tree(tmp_path / "store", work)
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{db}"}
    got = cli("check-failed-run", "--mlflow", run_id, "--out-dir", str(tmp_path / "out"), cwd=work, timeout=180, env=env)
    assert "loss 5" in got.stdout and "Traceback" not in got.stderr, got.stdout[-600:] + got.stderr[-600:]
    tri = cli("triage-runs", "--mlflow-experiment", "1", "--out-dir", str(tmp_path / "out2"), cwd=work, timeout=180, env=env)
    # the store was read: its one run finished, so no failed run is listed (a refusal names the store instead)
    assert "no FAILED or KILLED runs in MLflow experiment(s) 1" in tri.stdout and "Traceback" not in tri.stderr, tri.stdout[-600:] + tri.stderr[-600:]
    assert _tree(tmp_path / "store", work) == before


_CRASHED_WRITER = """
import os, sys, mlflow
mlflow.set_tracking_uri(f"sqlite:///{sys.argv[1]}")
client = mlflow.tracking.MlflowClient()
run = client.get_run(sys.argv[2])
for i in range(5, 40):
    client.log_metric(sys.argv[2], "loss", 1.0 / (i + 1), step=i)
print("logged", flush=True)
os.kill(os.getpid(), 9)  # a run killed while it logs: its -wal and -shm stay behind
"""


def test_a_crashed_wal_writers_files_are_never_rewritten(tmp_path: Path) -> None:
    """Thirty-sixth round, promise 1: a WAL store whose writer was killed keeps its '-wal' and '-shm'; the read-only
    connection took them for a live writer's and rebuilt the '-shm' index in place (its bytes and mtime changed). Now
    a WAL store is read immutable, and the evidence says the write-ahead log was not read."""
    db, run_id = _store(tmp_path / "store", wal=True)
    got = subprocess.run([sys.executable, "-c", _CRASHED_WRITER, str(db), run_id], check=False, capture_output=True,
                         text=True, timeout=300, cwd=tmp_path / "store")
    assert "logged" in got.stdout and got.returncode == -9, got.stdout + got.stderr[-600:]
    files = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "store").iterdir()}
    assert {"mlflow.db-wal", "mlflow.db-shm"} <= set(files), sorted(files)
    work = tmp_path / "work"
    work.mkdir()
    out = cli("check-failed-run", "--mlflow", run_id, "--out-dir", str(tmp_path / "out"), cwd=work, timeout=180,
              env={"MLFLOW_TRACKING_URI": f"sqlite:///{db}"})
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "store").iterdir()} == files
    assert "write-ahead log" in out.stdout and "Traceback" not in out.stderr, out.stdout[-800:] + out.stderr[-600:]


def test_a_store_switched_to_wal_between_two_reads_of_one_server_gains_no_file(tmp_path: Path) -> None:
    """Thirty-seventh round, promise 1: the server keeps one engine per store; its read-only URI was worked out when the
    engine was made, so a store read once in rollback-journal mode, then switched to WAL by its writer, was opened
    mode=ro on the next call and gained '-wal' and '-shm'."""
    import anyio

    db, run_id = _store(tmp_path / "store", wal=False)
    srv = Server(tmp_path, roots=[tmp_path])
    saved = dict(os.environ)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{db}"

    async def two_reads() -> list[str]:
        texts = []
        async with srv.client() as c:
            for i in range(2):
                res = await c.call_tool("get_mlflow_run", {"run_id": run_id})
                texts.append("\n".join(getattr(x, "text", "") for x in res.content))
                if i == 0:
                    con = sqlite3.connect(db)  # the store's writer switches it to WAL and closes
                    assert con.execute("pragma journal_mode=wal").fetchone()[0] == "wal"
                    con.close()
                    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db"]
        return texts

    try:
        texts = anyio.run(two_reads)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert all("loss" in t for t in texts), texts
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db"]
