"""Checkpoint inspection from structure alone: a 10 GiB run directory is inspected reading a few
kilobytes, broken saves are told apart from good ones, and nothing is ever unpickled."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ml_skills.collectors.artifacts import inventory
from ml_skills.collectors.checkpoints import inspect_dir, inspect_file

from bench.ckpt import GiB, big_run_dir


def _rchar() -> int:
    with open(f"/proc/{os.getpid()}/io") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("rchar:"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt") / "run"
    parts = big_run_dir(root, 10 * GiB)
    return root, parts


def _fresh(run_dir, tmp_path) -> tuple[Path, dict[str, Path]]:
    """A copy of the run directory (holes stay holes) that a test may break."""
    root, parts = run_dir
    dst = tmp_path / "run"
    subprocess.run(["cp", "-a", str(root), str(dst)], check=True)
    return dst, {k: dst / v.relative_to(root) for k, v in parts.items()}


def test_ten_gib_directory_is_inspected_from_headers(run_dir):
    root, _ = run_dir
    apparent = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert apparent >= 10 * GiB
    before = _rchar()
    inv = inventory(root)
    read = _rchar() - before
    assert read < 4 * 2**20, f"read {read} bytes of a {apparent}-byte directory"
    by_fmt = {c.format: c for c in inv.checkpoints}
    assert set(by_fmt) == {"sharded", "deepspeed", "fsdp-dcp", "latest-pointer"}
    assert all(c.valid for c in inv.checkpoints), [c.reason for c in inv.checkpoints]
    assert "4 ZeRO optimizer shard(s)" in by_fmt["deepspeed"].reason
    assert inv.newest_valid_checkpoint is not None and not inv.newest_valid_checkpoint.endswith("latest")


def test_safetensors_header_is_what_the_library_reads(run_dir):
    from safetensors import safe_open

    _, parts = run_dir
    with safe_open(str(parts["hf"] / "model-00001-of-00002.safetensors"), framework="pt") as f:
        assert set(f.keys()) == {"embed.weight", "layers.0.weight"}


def test_truncated_shard_is_detected(run_dir, tmp_path):
    _, parts = _fresh(run_dir, tmp_path)
    shard = parts["hf"] / "model-00002-of-00002.safetensors"
    os.truncate(shard, shard.stat().st_size // 2)
    info = inspect_dir(parts["hf"])
    assert not info.valid and "truncated" in info.reason


def test_index_naming_a_tensor_the_shard_lacks_is_detected(run_dir, tmp_path):
    _, parts = _fresh(run_dir, tmp_path)
    idx = parts["hf"] / "model.safetensors.index.json"
    idx.write_text(idx.read_text().replace('"lm_head.weight"', '"lm_head.bias"'))
    info = inspect_dir(parts["hf"])
    assert not info.valid and "lm_head.bias" in info.reason


def test_missing_zero_shard_and_cut_zip_are_detected(run_dir, tmp_path):
    _, parts = _fresh(run_dir, tmp_path)
    ds = parts["deepspeed"]
    (ds / "zero_pp_rank_2_mp_rank_00_optim_states.pt").unlink()
    info = inspect_dir(ds)
    assert not info.valid and "[2]" in info.reason
    model = ds / "mp_rank_00_model_states.pt"
    os.truncate(model, model.stat().st_size - 200)  # the central directory is at the end
    assert not inspect_file(model).valid


def test_fsdp_without_metadata_and_dangling_latest_are_detected(run_dir, tmp_path):
    root, parts = _fresh(run_dir, tmp_path)
    (parts["fsdp"] / ".metadata").unlink()
    shutil.rmtree(parts["deepspeed"])
    inv = inventory(root)
    by_fmt = {c.format: c for c in inv.checkpoints}
    assert not by_fmt["fsdp-dcp"].valid and ".metadata" in by_fmt["fsdp-dcp"].reason
    assert not by_fmt["latest-pointer"].valid and "does not exist" in by_fmt["latest-pointer"].reason


class _Trap:
    """Unpickling this creates a marker file (a stand-in for any code a hostile checkpoint runs)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_hostile_pickle_is_never_unpickled(tmp_path):
    marker = tmp_path / "PWNED"
    payload = pickle.dumps({"state_dict": _Trap(str(marker))}, protocol=2)
    run = tmp_path / "run"
    (run / "global_step7").mkdir(parents=True)
    with zipfile.ZipFile(run / "global_step7" / "mp_rank_00_model_states.pt", "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/version", "3\n")
    (run / "legacy.pt").write_bytes(payload)
    (run / "fsdp").mkdir()
    (run / "fsdp" / ".metadata").write_bytes(payload)
    (run / "fsdp" / "__0_0.distcp").write_bytes(b"\x00" * 64)
    inv = inventory(run)
    assert {c.format for c in inv.checkpoints} >= {"deepspeed", "torch-legacy", "fsdp-dcp"}
    assert not marker.exists()
    pickle.loads(payload)  # the trap is live: the same bytes, unpickled, do create the marker
    assert marker.exists()


def test_a_pth_that_torch_cannot_load_is_not_a_valid_checkpoint(tmp_path):
    """A Python path file (site-packages' *.pth) or a text file named .pt is not a resume target."""
    import torch
    from ml_skills.collectors import checkpoints

    good = tmp_path / "model.pth"
    torch.save({"w": torch.zeros(3)}, good)
    text = tmp_path / "site.pth"
    text.write_text("import sys; sys.path.insert(0, '/opt/x')\n")
    with pytest.raises(pickle.UnpicklingError):
        torch.load(text, weights_only=True)  # the control: torch really cannot load it
    assert checkpoints.inspect_file(good).valid
    bad = checkpoints.inspect_file(text)
    assert not bad.valid and "neither a zip archive nor a pickle" in bad.reason
