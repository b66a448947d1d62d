"""A run directory read as a whole run (fifth user trial, docs/user-trial.md: long runs and multi-rank directories).

- Two gloo ranks that enter different collectives (one rank skipped a batch): gloo aborts the rank whose buffer is
  too small with 'op.preamble.length <= op.nbytes. 100 vs 4': ranks calling different collectives, nccl-distributed,
  not a native crash; the other rank's 'Connection reset by peer' is its consequence. Each rank writes its own
  0/stderr.log, 1/stderr.log: the report tells them apart by their folders.
- A launcher's '-15 (SIGTERM)' for a worker is its own clean-up after another failed: it never makes the run a
  process crash by itself (catalog: launcher-child-sigterm, symptom, minor).
- The MLflow file store the run kept in its directory (mlruns/) is read as the run's history: a real run on 128
  samples whose validation loss is best at its first evaluations and climbs for the rest of the run is degraded,
  though its console log shows only a falling training loss.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.render import text

_RANK = textwrap.dedent("""
    import sys, datetime, torch, torch.distributed as dist
    rank, port = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=30))
    for step in range(5):
        dist.all_reduce(torch.ones(4))
        print(f"rank {rank} step {step} loss {1.0 / (step + 1):.3f}", flush=True)
    # rank 1 skipped one batch: it enters the end-of-epoch sync (100 values) while rank 0 still syncs gradients (4)
    dist.all_reduce(torch.ones(4 if rank == 0 else 100))
    dist.all_reduce(torch.ones(100))
""")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ranks_in_different_collectives_are_a_distributed_failure_named_by_folder(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    port, procs = str(_port()), []
    for r in (0, 1):
        (tmp_path / "run" / str(r)).mkdir(parents=True)
        out = open(tmp_path / "run" / str(r) / "stdout.log", "w")  # noqa: SIM115 - closed below
        err = open(tmp_path / "run" / str(r) / "stderr.log", "w")  # noqa: SIM115
        procs.append((subprocess.Popen([sys.executable, str(script), str(r), port], stdout=out, stderr=err), out, err))
    codes = []
    for p, out, err in procs:
        codes.append(p.wait(timeout=120))
        out.close()
        err.close()
    stderr0 = (tmp_path / "run" / "0" / "stderr.log").read_text()
    assert codes[0] == -6 and "op.preamble.length <= op.nbytes" in stderr0, (codes, stderr0[-500:])
    d = diagnose(DiagnoseRequest(target=str(tmp_path / "run")))
    assert d.primary_cause is not None and d.primary_cause.value == "nccl-distributed", d.root_cause
    report = text.render(d)
    assert "0/stderr.log:" in report and "op.preamble.length" in report, report


_OVERFIT = textwrap.dedent("""
    import os, torch, mlflow
    mlflow.set_tracking_uri("file:" + os.path.abspath("mlruns"))
    torch.manual_seed(0)
    x = torch.randn(2128, 32); y = (x[:, :4].sum(1, keepdim=True) + torch.randn(2128, 1))
    xt, yt, xv, yv = x[:128], y[:128], x[128:], y[128:]  # 128 training samples: a debugging cap left in
    model = torch.nn.Sequential(torch.nn.Linear(32, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with mlflow.start_run(run_name="cap-left-in"):
        for epoch in range(1, 401):
            loss = torch.nn.functional.mse_loss(model(xt), yt)
            opt.zero_grad(); loss.backward(); opt.step()
            mlflow.log_metric("train/loss", loss.item(), step=epoch)
            if epoch % 10 == 0:
                with torch.no_grad():
                    val = torch.nn.functional.mse_loss(model(xv), yv).item()
                mlflow.log_metric("val/loss", val, step=epoch)
                print(f"epoch {epoch}/400 train_loss {loss.item():.4f}", flush=True)
    print("Training finished: 400 epochs", flush=True)
""")


@pytest.mark.slow
def test_a_run_directory_s_own_mlflow_store_is_its_history(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("mlflow")
    run = tmp_path / "run"
    run.mkdir()
    env = dict(os.environ, MLFLOW_ALLOW_FILE_STORE="true")
    out = subprocess.run([sys.executable, "-c", _OVERFIT], check=False, cwd=run, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    (run / "train.log").write_text(out.stdout)
    vals = sorted((run / "mlruns").rglob("val/loss"))
    assert vals, list((run / "mlruns").rglob("*"))
    series = [float(line.split()[1]) for line in vals[0].read_text().splitlines()]
    assert series.index(min(series)) < len(series) // 20 + 1 and series[-1] > min(series) * 1.05  # the run did overfit
    d = diagnose(DiagnoseRequest(target=str(run)))
    assert d.run_status.value == "degraded", d.evidence
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch"
    assert any(e.source and e.source.startswith("mlflow:") for e in d.evidence), d.evidence
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    diagnose(DiagnoseRequest(target=str(run)))
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before  # read-only: the store is not touched


def test_the_run_directory_looks_for_the_files_the_tensorboard_reader_reads():
    from ml_skills.collectors import runstores, tensorboard
    assert runstores.TB_MARK == tensorboard.MARK


def test_a_hostile_store_is_read_within_the_directory_and_never_hangs(tmp_path):
    """An MLflow store whose metrics folder holds a symlink to a folder outside the run (with a loss file in it) and a
    FIFO: the outside history is not read, the FIFO is never opened, the diagnosis ends."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "loss").write_text("1796205310759 1e30 4\n1796205310760 1e30 5\n1796205310761 1e30 6\n")
    metrics = tmp_path / "run" / "mlruns" / "1" / "abc" / "metrics"
    metrics.mkdir(parents=True)
    (metrics / "evil").symlink_to(outside, target_is_directory=True)
    os.mkfifo(metrics / "fifo")
    (metrics.parent / "meta.yaml").write_text("status: 3\nrun_name: x\n")
    (tmp_path / "run" / "train.log").write_text("step 1 loss 0.5\n")
    d = diagnose(DiagnoseRequest(target=str(tmp_path / "run")))
    assert d.primary_cause is None, d.root_cause  # the outside file's 1e30 losses would read as divergence
    assert not any("1e+30" in e.text or "1e30" in e.text for e in d.evidence)


def test_a_wandb_store_copied_without_its_latest_run_link_is_read_from_its_newest_run(tmp_path):
    """A run directory copied with `cp -r`/rsync without links, or an offline store synced elsewhere, has run folders
    but no latest-run link (found by the tenth security round: only a note, its runs never read). A real offline W&B
    run of a diverging training: with the link removed, the directory's diagnosis still reads its history."""
    pytest.importorskip("wandb")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
    subprocess.run([sys.executable, "-m", "tests.collectors.wandb_offline", "diverging"], cwd=root, env=env, check=True,
                   capture_output=True, timeout=300)
    link = tmp_path / "wandb" / "latest-run"
    assert link.is_symlink()
    link.unlink()
    (tmp_path / "train.log").write_text("wandb: Tracking run with wandb version 0.19\nstarting training\n")
    d = diagnose(DiagnoseRequest(target=str(tmp_path)))
    assert any(e.source and e.source.startswith("wandb:") for e in d.evidence), d.evidence
    assert "no latest-run link" in d.model_dump_json()  # the reader says which run it took
