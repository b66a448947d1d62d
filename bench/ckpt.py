"""Build large checkpoint directories cheaply and honestly: real headers, sparse tensor data.

Every file starts as what the real library writes (torch.save zips, torch.distributed.checkpoint
folders, safetensors headers in the format's spec); the bulk that a real checkpoint would fill
with tensor bytes is a sparse hole (zeros that take no disk), so a 10 GiB directory costs
seconds to make and almost no space. The inspector must never read that bulk, so a hole is as
good as data for timing it.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

GiB = 2**30


class _SparseWriter(io.FileIO):
    """A file whose all-zero writes become holes (seek forward) instead of disk blocks."""

    def write(self, data) -> int:  # type: ignore[override]
        n = len(data)
        if n >= 4096 and bytes(data[:1]) == b"\x00" and data.count(0) == n:
            end = self.seek(n, os.SEEK_CUR)
            if end > os.fstat(self.fileno()).st_size:
                os.ftruncate(self.fileno(), end)
            return n
        return super().write(data)


def sparse_safetensors(path: Path, tensors: dict[str, int]) -> None:
    """A safetensors file: a real header (per the format's spec) for F32 tensors of the given byte sizes, data as a hole."""
    header, pos = {}, 0
    for name, nbytes in tensors.items():
        header[name] = {"dtype": "F32", "shape": [nbytes // 4], "data_offsets": [pos, pos + nbytes // 4 * 4]}
        pos += nbytes // 4 * 4
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        f.truncate(8 + len(raw) + pos)


def grown_torch_save(path: Path, obj: object, extra_bytes: int = 0) -> None:
    """torch.save(obj), then (if asked) one more stored zip entry of `extra_bytes` zeros written as a hole."""
    import torch

    torch.save(obj, path)
    if extra_bytes:
        with _SparseWriter(path, "r+") as raw, zipfile.ZipFile(raw, "a") as z:
            root = z.namelist()[0].split("/")[0]
            with z.open(zipfile.ZipInfo(f"{root}/data/bulk"), "w", force_zip64=True) as w:
                block = bytes(64 * 2**20)
                left = extra_bytes
                while left > 0:
                    w.write(block[: min(left, len(block))])
                    left -= len(block)


def dcp_folder(path: Path, extra_bytes: int = 0) -> None:
    """A real torch.distributed.checkpoint folder (.metadata + __0_0.distcp), its shard grown by a hole."""
    import warnings

    import torch
    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save({"model": {"w": torch.zeros(16)}}, checkpoint_id=str(path))
    if extra_bytes:
        shard = path / "__0_0.distcp"
        os.truncate(shard, shard.stat().st_size + extra_bytes)


def big_run_dir(root: Path, total: int = 10 * GiB) -> dict[str, Path]:
    """An output directory as a crashed multi-framework run leaves it, about `total` bytes (mostly holes)."""
    import torch

    root.mkdir(parents=True, exist_ok=True)
    hf = root / "checkpoint-1000"
    hf.mkdir()
    shard = int(total * 0.46)
    sparse_safetensors(hf / "model-00001-of-00002.safetensors", {"embed.weight": shard // 2, "layers.0.weight": shard // 2})
    sparse_safetensors(hf / "model-00002-of-00002.safetensors", {"layers.1.weight": shard // 2, "lm_head.weight": shard // 2})
    (hf / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 2 * shard}, "weight_map": {
        "embed.weight": "model-00001-of-00002.safetensors", "layers.0.weight": "model-00001-of-00002.safetensors",
        "layers.1.weight": "model-00002-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}}))
    ds = root / "global_step1000"
    ds.mkdir()
    grown_torch_save(ds / "mp_rank_00_model_states.pt", {"module": {"w": torch.zeros(4)}, "global_steps": 1000})
    for r in range(4):
        # zip entries carry a CRC, computed as they are written: keep these small so building stays fast
        grown_torch_save(ds / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt", {"optimizer_state_dict": {"r": r}}, 16 * 2**20)
    (root / "latest").write_text("global_step1000")
    dcp_folder(root / "step_1000_fsdp", int(total * 0.1))
    return {"hf": hf, "deepspeed": ds, "fsdp": root / "step_1000_fsdp", "latest": root / "latest"}
