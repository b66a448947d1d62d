"""Run the leaky scenario for real, with fresh fake secrets, into a directory whose name holds one too."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.security.fakes import Planted

SCENARIO = Path(__file__).parent / "scenarios" / "leaky_train.py"


@dataclass
class LeakyRun:
    planted: Planted
    run_dir: Path
    log: Path
    returncode: int

    def kinds(self) -> int:
        """Secret kinds planted: the value kinds, the service-account key id, the PEM key (escaped in JSON and plain)."""
        return len(self.planted.values) + 2

    def instances(self) -> int:
        """Occurrences of planted secrets in what the tools read: the log, the key files, the command, file names."""
        texts = [self.log.read_text(errors="replace"), *(p.read_text() for p in sorted(self.run_dir.glob("*.*")) if p != self.log),
                 "\n".join(str(p) for p in self.run_dir.iterdir())]
        return sum(t.count(s) for s in self.planted.all_secrets() for t in texts)


def run_leaky(base: Path, pad_bytes: int = 0) -> LeakyRun:
    """A real diverging run whose log, file names and config hold every kind of secret."""
    p = Planted()
    v = p.values
    run_dir = base / f"run-{v['hf']}"  # a secret in a file name, as when a token ends up in an output path
    run_dir.mkdir(parents=True)
    (run_dir / "sa.json").write_text(p.sa_json)
    (run_dir / "key.pem").write_text(p.pem)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
           "AWS_ACCESS_KEY_ID": v["aws-key-id"], "AWS_SECRET_ACCESS_KEY": v["aws-secret"], "GITHUB_TOKEN": v["github"],
           "OPENAI_API_KEY": v["openai"], "WANDB_API_KEY": v["wandb-v1"], "HF_TOKEN": v["hf"],
           "MLFLOW_TRACKING_URI": f"https://alice:{v['url-password']}@mlflow.example.com",
           "API_BEARER": v["bearer"], "SESSION_JWT": v["jwt"]}
    cmd = [sys.executable, "-u", str(SCENARIO), "--hf-token", v["hf"], "--wandb-api-key", v["wandb-hex"],
           "--api-key", v["cli-api-key"], "--password", v["cli-password"], "--sa-file", str(run_dir / "sa.json"),
           "--key-file", str(run_dir / "key.pem"), "--pad-bytes", str(pad_bytes)]
    log = run_dir / "train.log"
    with open(log, "wb") as out:
        rc = subprocess.run(cmd, cwd=run_dir, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=180, check=False).returncode
    (run_dir / "command.txt").write_text(" ".join(cmd[1:]) + "\n")
    return LeakyRun(p, run_dir, log, rc)
