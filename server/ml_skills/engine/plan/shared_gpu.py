"""Whether another process held the GPU when the run ran out of memory, as PyTorch's own message says.

Since 2.1 the CUDA out-of-memory message lists every process NVML sees on the device ('Process 2835 has 25.40 GiB
memory in use') before this process's own share ('Including non-PyTorch memory, this process has 21.34 GiB memory in
use'). Inside a container NVML reports host PIDs, so the list can name the run itself under another number: the other
processes are counted only when they and this process together account for what the device has in use (its capacity
less what is free), never more.
"""

from __future__ import annotations

from ml_skills.lazyre import lazy

_CAPACITY = lazy(r"total capacity of ([\d.]+) (GiB|MiB) of which ([\d.]+) (GiB|MiB|KiB|bytes) is free")
_PROCESS = lazy(r"\bProcess (\d+) has ([\d.]+) (GiB|MiB) memory in use")
_THIS = lazy(r"this process has ([\d.]+) (GiB|MiB) memory in use")
SHARE = 0.25  # another process holding a quarter of the device is no accident of fragmentation
_UNIT = {"GiB": 1.0, "MiB": 1 / 1024, "KiB": 1 / 1024**2, "bytes": 1 / 1024**3}


def others_holding(text: str) -> tuple[float, float, list[str]] | None:
    """(GiB held by other processes, the device's GiB, their PIDs) when other processes held at least SHARE of the
    device, as the out-of-memory message states it; None otherwise, or when the numbers do not add up."""
    cap, this = _CAPACITY.search(text), _THIS.search(text)
    procs = _PROCESS.findall(text)
    if cap is None or this is None or not procs:
        return None
    try:
        total = float(cap.group(1)) * _UNIT[cap.group(2)]
        free = float(cap.group(3)) * _UNIT[cap.group(4)]
        own = float(this.group(1)) * _UNIT[this.group(2)]
        others = sum(float(gib) * _UNIT[unit] for _, gib, unit in procs)
    except ValueError:  # digits and dots that are no number
        return None
    in_use = total - free
    if total <= 0 or others < SHARE * total or others + own > 1.05 * in_use + 0.5:
        return None
    return others, total, [pid for pid, _, _ in procs]
