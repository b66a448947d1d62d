"""Batch 50's miss, read as a general behaviour (docs/accuracy.md, batch 50; scored at bb2f0c9 before any change): NeMo's
'Dataset loaded with 0 files totalling 0.00 hours' (every manifest entry filtered out) is an empty dataset, as 'Found 0
images' is (1979 abstained: the run's num_samples=0 error lies outside the excerpt). 1979 is a verbatim public log (it fails on
bb2f0c9); the empty dataset below is a real PyTorch run, the control: its num_samples=0 error was read before too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.batchcase import case, run_script, verdict


def test_a_dataset_loaded_with_zero_files_is_an_empty_dataset():
    assert verdict(case("1979")) == ("data-pipeline", "crashed")


def test_a_real_loader_over_an_empty_dataset_is_a_data_failure(tmp_path: Path):
    pytest.importorskip("torch")
    log = run_script(tmp_path, """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        kept = [d for d in [1.5, 2.0, 30.0] if d > 40.0]  # every utterance longer than max_duration: none kept
        print(f"Dataset loaded with {len(kept)} files totalling 0.00 hours", flush=True)
        ds = TensorDataset(torch.zeros(len(kept), 4))
        loader = DataLoader(ds, batch_size=2, shuffle=True)
        for batch in loader:
            pass
    """)
    assert "num_samples=0" in log.read_text()
    assert verdict(log) == ("data-pipeline", "crashed")


def _next_commands(n: str) -> str:
    from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

    return "\n".join(diagnose(DiagnoseRequest(target=str(case(n)))).next_commands)


def test_an_out_of_memory_on_apple_mps_asks_the_mps_backend_for_its_limit_not_nvidia_smi():
    """Batches 49-50's memory plans had no command of their own for MPS, CuPy and CNTK wordings (1966, 1976, 1977)."""
    cmds = _next_commands("1966")
    assert "torch.mps.recommended_max_memory()" in cmds and "nvidia-smi" not in cmds


def test_cupy_and_cntk_out_of_memory_ask_the_gpu_for_its_memory():
    assert "nvidia-smi --query-gpu" in _next_commands("1976")
    assert "nvidia-smi --query-gpu" in _next_commands("1977")
