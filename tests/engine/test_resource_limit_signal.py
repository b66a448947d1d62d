"""A worker killed by a resource limit of its process is that limit's doing, not the data's (fifth user trial, case
09: 'DataLoader worker ... is killed by signal: CPU time limit exceeded' was read as a data error). A real run whose
DataLoader worker runs under a 1-second CPU-time limit (RLIMIT_CPU, as `ulimit -t` or a scheduler sets it) dies of
SIGXCPU: process-crash, with the fix that raises the limit among the first two."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

_RUN = textwrap.dedent("""
    import resource, torch
    from torch.utils.data import DataLoader, Dataset
    class Heavy(Dataset):
        def __len__(self): return 10_000
        def __getitem__(self, i):
            x = torch.randn(256, 256)
            for _ in range(20):
                x = torch.tanh(x @ x.T / 256)  # a CPU-heavy augmentation
            return x.mean(0)
    def limit(_):
        resource.setrlimit(resource.RLIMIT_CPU, (1, 30))  # SIGXCPU at 1 s (SIGKILL only at 30)
    if __name__ == "__main__":
        torch.set_num_threads(1)
        for step, batch in enumerate(DataLoader(Heavy(), batch_size=8, num_workers=1, worker_init_fn=limit)):
            print(f"step {step} | loss {batch.pow(2).mean().item():.4f}", flush=True)
""")


def test_a_worker_killed_by_its_cpu_time_limit_is_a_process_limit(tmp_path: Path):
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(_RUN)
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode != 0 and "CPU time limit exceeded" in r.stderr, r.stderr[-1500:]
    log = tmp_path / "train.log"
    log.write_text(r.stdout + r.stderr)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "process-crash", d.root_cause
    assert "raise-process-limit" in [f.fix_id for f in d.fixes[:2]], [f.fix_id for f in d.fixes]
