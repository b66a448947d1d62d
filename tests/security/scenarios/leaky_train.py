"""A real run that leaks its secrets the way training scripts do, then really diverges to NaN.

It prints its argparse Namespace (tokens given as flags), its environment-derived config, the
service-account key file it was pointed at, the private key it signs with, an HTTP request's
headers and its tracking URI with a password; then trains a small MLP at a learning rate that
overshoots, and its own finiteness check stops it with the arguments in the message.

Run: python leaky_train.py [--pad-bytes N] --hf-token T --wandb-api-key K --api-key A --password P --sa-file F --key-file PEM
"""

import argparse
import json
import os
import sys
import time

import torch

ap = argparse.ArgumentParser()
for flag in ("--hf-token", "--wandb-api-key", "--api-key", "--password", "--sa-file", "--key-file"):
    ap.add_argument(flag, required=True)
ap.add_argument("--lr", type=float, default=0.5)
ap.add_argument("--pad-bytes", type=int, default=0, help="first print dataset-loading lines until this many bytes are out")
args = ap.parse_args()
written = 0
shard = 0
while written < args.pad_bytes:  # exactly as many bytes as asked: the caller places a line on a read boundary
    line = f"loading shard {shard:07d} from /data/shards: 4096 samples ok\n"[: args.pad_bytes - written]
    sys.stdout.write(line)
    written += len(line)
    shard += 1
print(args, flush=True)
print("launch:", " ".join(sys.argv), flush=True)
cfg = {k: os.environ[k] for k in sorted(os.environ) if k.startswith(("AWS_", "GITHUB_", "OPENAI_", "WANDB_", "MLFLOW_", "HF_"))}
print("config:", json.dumps(cfg), flush=True)
with open(args.sa_file) as f:
    print("using credentials:", f.read(), flush=True)
with open(args.key_file) as f:
    print(f.read(), flush=True)
print({"Authorization": "Bearer " + os.environ["API_BEARER"], "X-Session": os.environ["SESSION_JWT"]}, flush=True)

torch.manual_seed(0)
X = torch.randn(2048, 32)
Y = X @ torch.randn(32, 1)
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
for step in range(1, 301):
    idx = torch.randint(0, X.shape[0], (64,))
    loss = torch.nn.functional.mse_loss(model(X[idx]), Y[idx])
    opt.zero_grad()
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    opt.step()
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] step {step} | loss {loss.item():.4f} | grad_norm {gn.item():.4f}", flush=True)
    if not torch.isfinite(loss):
        raise FloatingPointError(f"Loss became infinite or NaN at iteration={step}! args={vars(args)} token={args.hf_token}")
print("training completed")
