"""Inspect checkpoints from their structure only: never load tensors, never unpickle.

safetensors: the 8-byte header length, the JSON header, and the end of the last tensor must
match the file size. PyTorch zip archives: the central directory must be present and every
entry must fit inside the file. Directories (HF checkpoint-N/, DeepSpeed global_stepN/) are
valid when they hold at least one valid weights file. A truncated save fails these checks.
"""

from __future__ import annotations

import json
import re
import struct
import zipfile
from datetime import UTC, datetime
from pathlib import Path

from ml_skills.models import CheckpointInfo

WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".ckpt", ".bin", ".h5", ".keras", ".pkl", ".msgpack", ".npz")
_STEP = re.compile(r"(?:checkpoint|global_step|step|iter|epoch|ckpt|model)[-_=]?(\d+)", re.IGNORECASE)
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024


def step_of(name: str) -> int | None:
    m = None
    for m in _STEP.finditer(name):
        pass
    return int(m.group(1)) if m else None


def _safetensors(path: Path, size: int) -> tuple[bool, str]:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return False, "shorter than the 8-byte safetensors header length"
        (n,) = struct.unpack("<Q", head)
        if n > MAX_SAFETENSORS_HEADER or 8 + n > size:
            return False, f"header length {n} does not fit in a {size}-byte file (truncated or not safetensors)"
        try:
            header = json.loads(f.read(n))
        except ValueError:
            return False, "header is not valid JSON (corrupt)"
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__" and isinstance(v, dict) and "data_offsets" in v]
    expected = 8 + n + (max(ends) if ends else 0)
    if expected > size:
        return False, f"truncated: tensors end at byte {expected} but the file has {size}"
    return True, f"{len(ends)} tensors, header ok"


def _torch_zip(path: Path, size: int) -> tuple[bool, str]:
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except zipfile.BadZipFile as e:
        return False, f"zip structure broken ({e}): truncated or not a PyTorch zip checkpoint"
    except OSError as e:
        return False, f"cannot read: {e}"
    if not any(i.filename.endswith("data.pkl") for i in infos):
        return False, "zip archive without data.pkl: not a torch.save file"
    for i in infos:
        if i.header_offset + i.compress_size > size:
            return False, f"entry {i.filename} extends past the end of the file (truncated)"
    return True, f"{len(infos)} zip entries, central directory ok"


def inspect_file(path: Path) -> CheckpointInfo:
    st = path.stat()
    size = st.st_size
    mtime = datetime.fromtimestamp(st.st_mtime, UTC)
    if size == 0:
        return CheckpointInfo(path=str(path), format="empty", size_bytes=0, mtime=mtime, step=step_of(path.name), valid=False, reason="empty file")
    with open(path, "rb") as f:
        magic = f.read(4)
    if path.suffix == ".safetensors":
        fmt = "safetensors"
        valid, reason = _safetensors(path, size)
    elif magic == b"PK\x03\x04" or path.suffix in (".pt", ".pth", ".ckpt", ".bin") and magic[:2] == b"PK":
        fmt = "torch-zip"
        valid, reason = _torch_zip(path, size)
    elif magic[:2] == b"\x80\x02" or magic[:1] == b"\x80":
        fmt = "torch-legacy"
        valid, reason = True, "legacy pickle format: structure cannot be verified without unpickling (not done)"
    elif magic == b"\x89HDF":
        fmt = "hdf5"
        valid, reason = True, "HDF5 signature present"
    else:
        fmt = "unknown"
        valid, reason = size > 0, "unrecognised format; only the size was checked"
    return CheckpointInfo(path=str(path), format=fmt, size_bytes=size, mtime=mtime, step=step_of(path.name), valid=valid, reason=reason)


def inspect_dir(path: Path) -> CheckpointInfo:
    """A checkpoint folder (checkpoint-500/, global_step500/): valid if its weights are."""
    files = [p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in WEIGHT_SUFFIXES][:200]
    st = path.stat()
    size = sum(p.stat().st_size for p in files)
    mtime = max([datetime.fromtimestamp(p.stat().st_mtime, UTC) for p in files] or [datetime.fromtimestamp(st.st_mtime, UTC)])
    if not files:
        return CheckpointInfo(path=str(path), format="dir", size_bytes=0, mtime=mtime, step=step_of(path.name), valid=False, reason="no weights files inside")
    bad = [(p, i) for p in files if not (i := inspect_file(p)).valid]
    index = next((p for p in path.glob("*.index.json")), None)
    reason = f"{len(files)} weight files"
    if index is not None:
        try:
            wm = json.loads(index.read_text("utf-8")).get("weight_map", {})
            missing = sorted({v for v in wm.values() if not (path / v).exists()})
            if missing:
                return CheckpointInfo(path=str(path), format="sharded", size_bytes=size, mtime=mtime, step=step_of(path.name), valid=False,
                                      reason=f"index names missing shards: {', '.join(missing[:3])}")
        except ValueError:
            return CheckpointInfo(path=str(path), format="sharded", size_bytes=size, mtime=mtime, step=step_of(path.name), valid=False, reason="index JSON is corrupt")
    if bad:
        p, i = bad[0]
        return CheckpointInfo(path=str(path), format="dir", size_bytes=size, mtime=mtime, step=step_of(path.name), valid=False, reason=f"{p.name}: {i.reason}")
    return CheckpointInfo(path=str(path), format="dir", size_bytes=size, mtime=mtime, step=step_of(path.name), valid=True, reason=reason + ", all valid")
