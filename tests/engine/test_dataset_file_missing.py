"""A tensor file a dataset reads is data, even when it ends in .pt (issue 13: the frames say what was being read).

Corpus 1102 (a committed SLURM log): PyTorch Geometric's dataset processing torch.load()s 'data/NCanda/raw/...pt'
and it does not exist. A real PyTorch run on CPU: a Dataset whose __getitem__ loads one .pt file per sample, one of
them missing; and a resume from a missing checkpoint file, which stays io-checkpoint.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]

RUN = textwrap.dedent("""
    import os, sys, torch
    root = sys.argv[1]
    os.makedirs(f"{root}/samples", exist_ok=True)
    for i in range(8):
        if i != 5:
            torch.save(torch.randn(4), f"{root}/samples/{i}.pt")
    class Samples(torch.utils.data.Dataset):
        def __len__(self):
            return 8
        def __getitem__(self, i):
            return torch.load(f"{root}/samples/{i}.pt")
    if sys.argv[2] == "resume":
        torch.load(f"{root}/checkpoints/last.pt")
    for step, batch in enumerate(torch.utils.data.DataLoader(Samples(), batch_size=1)):
        print(f"step {step} loss {batch.sum().item():.4f}", flush=True)
""")


def _run(tmp_path: Path, mode: str) -> str:
    out = subprocess.run([sys.executable, "-c", RUN, str(tmp_path), mode], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode != 0 and "FileNotFoundError" in out.stderr
    log = tmp_path / "train.log"
    log.write_text(out.stdout + out.stderr)
    return str(log)


def test_a_missing_sample_file_is_data(tmp_path):
    pytest.importorskip("torch")
    d = diagnose(DiagnoseRequest(target=_run(tmp_path, "train")))
    assert d.primary_cause is not None and d.primary_cause.value == "data-pipeline"


def test_a_missing_checkpoint_stays_a_checkpoint(tmp_path):
    pytest.importorskip("torch")
    d = diagnose(DiagnoseRequest(target=_run(tmp_path, "resume")))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint"


def test_pyg_raw_tensor_file():
    log = next((TESTS / "corpus").glob("1102-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "data-pipeline"
