"""TinyLM trained for many epochs on a 128-sample shard (a debug data limit left in the config),
tracked in a local MLflow file store in the run directory. The console prints only the training
loss; the validation history is in MLflow.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import mlflow
import numpy as np
import torch
from common import TinyLM, dump_config, lm_loss, markov_tokens, setup_logging
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient


def now_ms() -> int:  # (the file keeps its run-time line count: imports were lint-fixed after the runs)
    """Milliseconds since the epoch, as MLflow stores metric timestamps."""
    return int(time.time() * 1000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--epochs", type=int, default=2000)
    ap.add_argument("--max-train-samples", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    log = setup_logging(None)
    run_dir = Path(a.run_dir).resolve()
    rng = np.random.default_rng(5)
    full = torch.from_numpy(markov_tokens(rng, 50000 + 2048))
    train, val = full[: a.max_train_samples], full[50000:50512]
    cfg = {"model": {"name": "tinylm", "d_model": 128}, "optim": {"name": "adamw", "lr": a.lr, "weight_decay": 0.0},
           "data": {"dataset_size": 50000, "max_train_samples": a.max_train_samples, "val_size": len(val), "eval_every_epochs": 5,
                    "batch_size": a.batch},
           "train": {"epochs": a.epochs, "log_every_epochs": 100}}
    dump_config(log, cfg)
    mlflow.set_tracking_uri(f"file:{run_dir / 'mlruns'}")
    mlflow.set_experiment("tinylm-pretrain")
    model = TinyLM(d=128)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
    step = 0
    with mlflow.start_run(run_name="tinylm-d128") as run:
        log.info("mlflow run %s (experiment tinylm-pretrain) tracking to %s", run.info.run_id, mlflow.get_tracking_uri())
        mlflow.log_params({"lr": a.lr, "d_model": 128, "batch_size": a.batch, "epochs": a.epochs,
                           "max_train_samples": a.max_train_samples})
        t0 = time.time()
        client = MlflowClient()
        buf: list[Metric] = []
        for epoch in range(1, a.epochs + 1):
            perm = torch.randperm(len(train))
            tot = 0.0
            for i in range(0, len(train), a.batch):
                loss = lm_loss(model, train[perm[i:i + a.batch]])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                step += 1
                tot += loss.item()
                if step % 4 == 0:
                    buf += [Metric("train/loss", loss.item(), now_ms(), step),
                            Metric("train/grad_norm", float(gn), now_ms(), step)]
            buf.append(Metric("train/epoch_loss", tot / (len(train) // a.batch), now_ms(), step))
            if epoch % 5 == 0:
                model.eval()
                with torch.no_grad():
                    vl = float(lm_loss(model, val))
                model.train()
                buf += [Metric("val/loss", vl, now_ms(), step), Metric("val/ppl", math.exp(min(vl, 50)), now_ms(), step)]
            if len(buf) >= 900 or epoch == a.epochs:  # the tracker is flushed in batches (log_batch: <= 1000)
                client.log_batch(run.info.run_id, metrics=buf)
                buf = []
            if epoch % 100 == 0:
                log.info("epoch %d/%d | step %d | train_loss %.4f | %.1f s", epoch, a.epochs, step,
                         tot / (len(train) // a.batch), time.time() - t0)
        torch.save(model.state_dict(), run_dir / "model_final.pt")
        mlflow.log_artifact(str(run_dir / "model_final.pt"))
        log.info("saved final model to %s", run_dir / "model_final.pt")
    log.info("Training finished: %d epochs, %d steps", a.epochs, step)


if __name__ == "__main__":
    main()
