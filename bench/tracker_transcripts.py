"""Regenerate the CLI outputs in docs/trackers.md.

    PYTHONPATH=server python bench/tracker_transcripts.py

The same setup as tests/collectors: a real `mlflow server` (sqlite backend, proxied artifacts) on
a free loopback port with a run logged by the mlflow client from the real PyTorch training of
tests/collectors/training.py; real W&B offline runs written by the wandb library
(`python -m tests.collectors.wandb_offline nan`); the real wandb client against the GraphQL fake
of tests/collectors/wandb_fake.py. Ports, run ids and the offline run's timestamp change from
one regeneration to the next; everything else is stable.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.doc_blocks import ROOT, replace_fenced, run_cli, shown
from tests.collectors.training import train
from tests.collectors.wandb_fake import FakeRun, FakeWandb

DOC = ROOT / "docs" / "trackers.md"
KEY = "0123456789abcdef0123456789abcdef01234567"
MLFLOW = "## `--mlflow RUN_ID` (tracking server)"
OFFLINE = "## `--wandb wandb/offline-run-*` (local run directory)"
ONLINE = "## `--wandb entity/project/run_id` (public API)"
WORK = Path(tempfile.gettempdir()) / "ml-skills-docs"  # fixed, so the offline run's absolute path is stable


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def mlflow_server(root: Path) -> Iterator[str]:
    """A real mlflow server on loopback, as tests/collectors/test_mlflow.py starts it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with open(root / "server.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                                 "--workers", "1", "--backend-store-uri", f"sqlite:///{root}/mlflow.db",
                                 "--artifacts-destination", str(root / "artifacts")],
                                cwd=root, env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        t0 = time.monotonic()
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() - t0 > 240:
                    raise SystemExit("mlflow server did not start: " + (root / "server.log").read_text()[-2000:]) from None
                time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


def mlflow_diverging(url: str) -> str:
    """Log the diverging training as test_mlflow.py does (each metric's series in its own call)."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=url)
    rid = client.create_run(client.create_experiment("ml-skills-docs"), run_name="diverging").info.run_id
    client.log_param(rid, "optimizer", "sgd")
    client.log_param(rid, "batch_size", "16")
    series: dict[str, list[Metric]] = {}
    now, out = int(time.time() * 1000), io.StringIO()
    ended = train("diverging", lambda step, d: [series.setdefault(k, []).append(Metric(k, v, now + step, step)) for k, v in d.items()], out)
    for metrics in series.values():
        client.log_batch(rid, metrics=metrics)
    client.log_text(rid, out.getvalue(), "output.log")
    client.set_terminated(rid, "FINISHED" if ended == "finished" else "FAILED")
    return rid


def mlflow_blocks(text: str, tmp: Path) -> str:
    with mlflow_server(tmp) as url:
        rid = mlflow_diverging(url)
        env = {"MLFLOW_TRACKING_URI": url}
        main = shown(f"MLFLOW_TRACKING_URI={url} ml-skills check-failed-run --mlflow {rid}",
                     run_cli(["check-failed-run", "--mlflow", rid], env, tmp))
        unknown = "f" * 32
        faults = [shown(f"MLFLOW_TRACKING_URI={url} ml-skills check-failed-run --mlflow {unknown}",
                        run_cli(["check-failed-run", "--mlflow", unknown], env, tmp))]
    down = f"http://127.0.0.1:{_free_port()}"
    faults.append(shown(f"MLFLOW_TRACKING_URI={down} ml-skills check-failed-run --mlflow {rid}",
                        run_cli(["check-failed-run", "--mlflow", rid], {"MLFLOW_TRACKING_URI": down}, tmp)))
    return replace_fenced(replace_fenced(text, MLFLOW, main), MLFLOW, "\n".join(faults), nth=1)


def offline_block(text: str, tmp: Path) -> str:
    env = {**os.environ, "WANDB_DIR": str(tmp), "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
    subprocess.run([sys.executable, "-m", "tests.collectors.wandb_offline", "nan"], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=300)
    run = next((tmp / "wandb").glob("offline-run-*-nanrun")).relative_to(tmp)
    return replace_fenced(text, OFFLINE, shown(f"ml-skills check-failed-run --wandb {run}",
                                                run_cli(["check-failed-run", "--wandb", str(run)], cwd=tmp)))


def online_blocks(text: str, tmp: Path) -> str:
    rows: dict[int, dict] = {}
    out = io.StringIO()
    train("diverging", lambda step, d: rows.setdefault(step, {"_step": step, "_runtime": step * 0.1}).update(d), out)
    with FakeWandb(KEY) as fake:
        fake.runs["3kq8zv2d"] = FakeRun("failed", {"optimizer": "sgd", "lr": 0.05}, [rows[k] for k in sorted(rows)],
                                        {"output.log": out.getvalue().encode(), "config.yaml": b"lr: 0.05\n"},
                                        {"system.gpu.0.memoryAllocatedBytes": 2.1e9, "system.proc.memory.rssMB": 812.0})
        args = ["check-failed-run", "--wandb", "team/proj/3kq8zv2d"]
        env = {"WANDB_BASE_URL": fake.url, "WANDB_API_KEY": KEY}
        cmd = f"WANDB_BASE_URL={fake.url} WANDB_API_KEY=... ml-skills " + " ".join(args)
        text = replace_fenced(text, ONLINE, shown(cmd, run_cli(args, env, tmp)))
        fake.faults["HistoryPage"] = [("status", 500)] * 10
        text = replace_fenced(text, ONLINE, shown(cmd, run_cli(args, env, tmp)), nth=1)
        fake.faults.clear()
        bad = shown(cmd.replace("WANDB_API_KEY=...", "WANDB_API_KEY=ffff..."), run_cli(args, {**env, "WANDB_API_KEY": "f" * 40}, tmp))
        return replace_fenced(text, ONLINE, bad, nth=2)


def main() -> None:
    text = DOC.read_text()
    shutil.rmtree(WORK, ignore_errors=True)
    for name, step in (("mlflow", mlflow_blocks), ("wandb offline", offline_block), ("wandb online", online_blocks)):
        work = WORK / name.replace(" ", "-")
        work.mkdir(parents=True)
        text = step(text, work)
        print(f"trackers: {name}")
    DOC.write_text(text)


if __name__ == "__main__":
    main()
